// Loop-carried values that a reversed loop recovers by inverting their
// update instead of reading them from a tape.
//
// A loop that runs in reverse needs each iteration's incoming carried
// values. The general way is a tape: the forward replay stores them, the
// reversed loop loads them. The rescaled sums of an online softmax,
//
//     alpha = tl.math.exp2(m_i - m_ij)
//     l_i = l_i * alpha + tl.sum(p, 1)
//     acc = acc * alpha[:, None] + tl.dot(p, v)
//
// can instead be recovered from their outgoing values,
// l_i = (l_i' - tl.sum(p, 1)) / alpha, so only the running max (a
// `tl.maximum`, which loses the old value) stays on the tape: for flash
// attention that is one value per row instead of HEAD_DIM + 2.
//
// Dividing is safe only under conditions this module checks:
//  - the update is `c * s`, `c * s + t`, `t + c * s`, `c * s - t` or
//    `tl.dot(a, b, c * s)`, and the loop body reads `c` nowhere else, so its
//    only use in the backward is the adjoint of `s`, `ds += dc' * c`;
//  - `s` is an exponential (`tl.exp`, `tl.exp2`, `tl.math.exp`,
//    `tl.math.exp2`), possibly broadcast (`x[:, None]`, `tl.expand_dims`,
//    `tl.broadcast_to`, `tl.reshape`). Its own adjoint multiplies by `s`, so
//    whatever the recovered `c` is where `s` is 0 (the first iteration of an
//    online softmax, where m_i is -inf; or an underflow), its contribution is
//    multiplied by 0. The backward therefore uses 0 where the quotient is not
//    finite or s is below float32's normal range (where it would be a huge
//    multiple of rounding error; what is dropped there is s * c < 2**-126 |c|).
//    The same factor cancels the rounding that the division amplifies:
//    the backward only ever uses `s * c = c' - t`, which is as accurate as
//    the forward's own sum.
// Where s carries no gradient (`h = h * 0.9 + x`) the backward never reads
// c at all: it needs neither. Anything else (a linear recurrence
// `h = a * h + x` with a loaded `a`, which can be 0 while `da = dh' * h` is
// not) stays on the tape.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/ad/Anf.h"
#include "tgrad/ast/Ast.h"
#include "tgrad/sema/Sema.h"

namespace tgrad::ad {

struct InvertibleUpdate {
  std::string carried;  // c: the incoming value (ANF name, `acc_2`)
  std::string scaled;   // `c * s`; the same as `updated` when the update has no term
  std::string updated;  // c': the outgoing value (`acc_3`)
  std::string scale;    // s (`alpha_col`)
  std::string exponential;  // the exponential that s is a view of (`alpha`)
  ast::ExprPtr term;    // t, or null; for `tl.dot(a, b, c * s)` the call without its accumulator
  bool subtracted = false;  // c' = c * s - t
  // s carries no gradient (a literal, or a value independent of the inputs
  // differentiated): the backward never reads c, so the reversed loop
  // neither inverts nor tapes it (`h = h * 0.9 + x`). c' is read nowhere but
  // the end-of-body copy.
  bool unneeded = false;
};

// What the analysis needs to know about the kernel's names.
struct InversionContext {
  // The one assignment of a name anywhere in the kernel, or null (none, or several).
  std::function<const ast::Assign *(const std::string &)> definition;
  // The builtin a call's callee resolves to ("tl.exp2", "math.exp2", "tl.dot"), or "".
  std::function<std::string(const ast::Call &)> builtin;
  // A name's type, or null.
  std::function<const sema::SType *(const std::string &)> type_of;
  // Whether a name depends on the inputs differentiated.
  std::function<bool(const std::string &)> active;
};

// The carried values of loop `f` (among `carried`) that the reversed loop
// recovers by inverting their update, keyed by the carried name.
std::map<std::string, InvertibleUpdate> find_invertible_updates(const ast::For &f,
                                                                const std::vector<LoopCarried> &carried,
                                                                const InversionContext &context);

// The statement that recovers `u.carried` from `u.updated` in the reversed
// loop, as Python text: the quotient, then 0 where it is not finite or the
// scale is subnormal.
// `quotient` is a fresh name for the unguarded quotient; `cast` converts
// to the carried value's dtype ("" for float32).
std::string inversion_code(const InvertibleUpdate &u, const std::string &quotient, const std::string &cast);

}  // namespace tgrad::ad
