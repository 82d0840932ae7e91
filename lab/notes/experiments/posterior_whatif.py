"""Scratch what-if (lab notes, "Item 3 of issue 47"): the non-front Poisson refresh pages of
one state, their planned budget re-solved under the plug-in price (w dF/df at λ̂), the
posterior's expected price (split normal on log λ from lambda_lo/lambda_hi) and the
certainty-equivalent price of `ce`, each scored sum w F(λ, f) with the true λ against the
allocation that knows λ. Reads the `age` runs under /tmp/i47b. Usage: WEB [STATE_DAY]."""
import pandas as pd, glob, numpy as np, sys
web=sys.argv[1]; day=sys.argv[2] if len(sys.argv)>2 else '2026-01-14'
b=f'/tmp/i47b/age_{web}_s0_w/seed0/optimal/data/'
rd=lambda p: pd.concat([pd.read_parquet(f) for f in glob.glob(p,recursive=True)])
st=rd(b+f'state/dt={day}/**/*.parquet')
nd=(pd.Timestamp(day)+pd.Timedelta(days=1)).strftime('%Y-%m-%d')
pl=rd(b+f'plan/dt={nd}/**/*.parquet')[['url','reason','planned_rate','lane']]
l=pd.read_parquet(glob.glob(b+'_truth/lambda/**/*.parquet',recursive=True)[0])
t=pd.read_parquet(glob.glob(b+'_truth/pages/**/*.parquet',recursive=True)[0])[['url','kind']]
x=st.merge(l,on='url').merge(t,on='url').merge(pl,on='url')
x=x[(x.kind.astype(str).isin(['poisson','0']))&(x.lane_y=='refresh')&x.lambda_hat.notna()&(x.url.str.count('/')>3)]
w=x.importance.to_numpy(float); lh=x.lambda_hat.to_numpy(float); lt=x['lambda'].to_numpy(float)
lo=x.lambda_lo.to_numpy(float); hi=x.lambda_hi.to_numpy(float)
sl=np.clip(np.log(lh/lo)/1.645,1e-3,None); sh=np.clip(np.log(hi/lh)/1.645,1e-3,None)
B=x.planned_rate.sum(); fmin=1/90
nodes,wts=np.polynomial.hermite_e.hermegauss(24); wts=wts/wts.sum()
def F(lam,f):
    lam=np.asarray(lam,float); r=lam/f
    return np.where(lam<=0,1.0,np.where(r<1e-8,1-r/2,-np.expm1(-r)/np.where(r>0,r,1)))
def dF(lam,f):
    r=lam/f; return np.where(lam<=0,0.0,-np.expm1(-r)/lam - np.exp(-r)/f)
def mv_plug(f): return w*dF(lh,f)
# split normal on log λ: left side sd sl, right side sh (mode lh); nodes z: use sl for z<0
Z=np.log(lh)[:,None]+np.where(nodes[None,:]<0,sl[:,None],sh[:,None])*nodes[None,:]
# split-normal weights: mass left sl/(sl+sh), right sh/(sl+sh)
left=(nodes<0); 
def mv_bayes(f):
    L=np.exp(Z); d=dF(L,f[:,None])
    wl=np.where(left[None,:],2*sl[:,None]/(sl+sh)[:,None],2*sh[:,None]/(sl+sh)[:,None])*wts[None,:]
    wl=wl/wl.sum(1,keepdims=True)
    return w*(d*wl).sum(1)
def alloc(mv,mu):
    lo_=np.full(len(w),-12.0); hi_=np.full(len(w),6.0)
    for _ in range(50):
        m=(lo_+hi_)/2; v=mv(np.exp(m)); lo_=np.where(v>mu,m,lo_); hi_=np.where(v>mu,hi_,m)
    return np.maximum(np.exp((lo_+hi_)/2),fmin)
def solve(mv):
    a,bq=-8,8
    for _ in range(40):
        m=(a+bq)/2; f=alloc(mv,np.exp(m))
        if f.sum()>B: a=m
        else: bq=m
    return alloc(mv,np.exp(bq))
def mv_true(f): return w*dF(lt,f)
fo=solve(mv_true); fp=solve(mv_plug); fb=solve(mv_bayes)
# ce: λ* with F(λ*, f=λ̂) = E[F(λ, f=λ̂)]
L=np.exp(Z); wl=np.where(left[None,:],2*sl[:,None]/(sl+sh)[:,None],2*sh[:,None]/(sl+sh)[:,None])*wts[None,:]; wl=wl/wl.sum(1,keepdims=True)
EF=(F(L,lh[:,None])*wl).sum(1)
a_=np.log(lh)-10; b_=np.log(lh)+10
for _ in range(60):
    m=(a_+b_)/2; v=F(np.exp(m),lh); a_=np.where(v>EF,m,a_); b_=np.where(v>EF,b_,m)
lce=np.exp((a_+b_)/2)
fc=solve(lambda f: w*dF(lce,f))
S=lambda f:(w*F(lt,f)).sum()
print(f'{web} {day} pages {len(w)} budget {B:.0f}: plug/oracle {S(fp)/S(fo):.4f}  bayes/oracle {S(fb)/S(fo):.4f}  ce/oracle {S(fc)/S(fo):.4f}  actual-plan/oracle {S(np.maximum(x.planned_rate.to_numpy(),fmin))/S(fo):.4f}')
bands=pd.cut(lt,[-1,0.05,0.1,1,3,100]); tr=x.lm_n.to_numpy()>0
D=pd.DataFrame({'band':bands,'trusted':tr,'o':fo,'p':fp,'b':fb})
print(D.groupby(['band','trusted'],observed=True).sum().round(1).to_string())
