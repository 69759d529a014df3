#include "tgrad/api/Allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tgrad {

// Why these values: include/tgrad/api/Allocator.h.
void tune_allocator() {
#if defined(__GLIBC__)
  mallopt(M_MXFAST, 0);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace tgrad
