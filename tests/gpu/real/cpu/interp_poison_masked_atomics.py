# Interpreter: the value an atomic returns on a masked-out lane is undefined in Triton (the interpreter returns
# uninitialised memory; compiled Triton leaves the predicated-off register). Make it NaN, so that code which uses it
# shows it every time instead of by luck.
import numpy as np
import triton.runtime.interpreter as _interp
_orig_rmw = _interp.InterpreterBuilder.create_atomic_rmw
def _poisoned_rmw(self, rmwOp, ptr, val, mask, sem, scope):
    out = _orig_rmw(self, rmwOp, ptr, val, mask, sem, scope)
    if np.issubdtype(np.asarray(out.data).dtype, np.floating):
        m = np.broadcast_to(np.asarray(mask.data).astype(bool), np.shape(out.data))
        out = _interp.TensorHandle(np.where(m, out.data, np.nan).astype(out.data.dtype), out.dtype)
    return out
_interp.InterpreterBuilder.create_atomic_rmw = _poisoned_rmw
