import math, numpy as np
from benchmarks.quality.changepoint_calibration import _ramp
from benchmarks.changepoint_noise import incremental
bad=0
for h in range(100):
    r=_ramp((0,h))
    if not (len(r)==1 and r[0][1]):
        y = np.random.default_rng([0, 200, h]).normal(0.0, 0.01, 160)
        y[60:100] += np.linspace(0, math.log(1.10), 41)[1:]; y[100:] += math.log(1.10)
        print(h, [(t, a, cp.end, round(cp.ratio,3), cp.continues is not None) for t,cp,a in incremental(y,200)])
