import numpy as np
import triton.runtime.interpreter as _interp
_TH = _interp.TensorHandle
def _bmask(ptrs, mask):
    m = np.asarray(mask.data)
    if m.dtype != np.bool_ or m.shape != np.shape(ptrs.data):
        m = np.ascontiguousarray(np.broadcast_to(m.astype(np.bool_), np.shape(ptrs.data)))
        return _TH(m, mask.dtype)
    return mask
_ol, _os = _interp.InterpreterBuilder.create_masked_load, _interp.InterpreterBuilder.create_masked_store
_interp.InterpreterBuilder.create_masked_load = lambda self, ptrs, mask, *a: _ol(self, ptrs, _bmask(ptrs, mask), *a)
_interp.InterpreterBuilder.create_masked_store = lambda self, ptrs, value, mask, *a: _os(self, ptrs, value, _bmask(ptrs, mask), *a)
