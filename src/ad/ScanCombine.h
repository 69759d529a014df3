// What a tl.associative_scan's combine function computes, for reverse mode.
//
// tgrad differentiates the scans whose adjoint is itself a scan: a running
// sum (combine(a, b) = a + b; its adjoint is a running sum from the other
// end) and a first-order linear recurrence over (coefficient, state) pairs
// (combine((a1, h1), (a2, h2)) = (a1 * a2, h1 * a2 + h2), which computes
// h[t] = a[t] * h[t-1] + x[t]; its adjoint is the recurrence run the other
// way). The combine function is recognised by what it computes, not how it
// is spelled: tgrad's interpreter runs it in float64 on random operands and
// compares the results with each form (the two forms are polynomials, so
// agreement at several random points leaves no doubt in practice).
#pragma once

#include <cstddef>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad {

struct ScanCombine {
  enum class Kind { Other, Sum, FirstOrderRecurrence };
  Kind kind = Kind::Other;
  // FirstOrderRecurrence: which input holds the coefficients, which the states.
  size_t coefficient = 0, state = 1;
};

// `combine` takes 2 * inputs scalars (the first element's values, then the
// second's) and returns `inputs` values.
ScanCombine classify_scan_combine(const ast::Module &module, const ast::Function &combine, size_t inputs);

// What the combine function of a tl.reduce over one tensor computes, recognised the same way (on random operands
// of both signs): a sum, a product, a maximum or a minimum, whose reductions have known adjoints; Other for the
// rest (a Welford step over tuples, a bitwise or).
enum class ReduceCombine { Other, Sum, Product, Max, Min };
ReduceCombine classify_reduce_combine(const ast::Module &module, const ast::Function &combine);

}  // namespace tgrad::ad
