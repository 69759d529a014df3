# expect: 4:1: warning: '@triton.jit' decorates a class; tgrad skips it
# expect: 7:1: warning: '@triton.jit' is not followed by a function definition; tgrad skips it
import triton
@triton.jit
class K:
    pass
@triton.jit
