// Errors as values: what every call of tgrad's library API returns.
//
// A call either gives its value or an Error that says why not. Errors in the
// kernel are diagnostics with their locations, rendered as the `tgrad` command
// line prints them (`file:line:col: error: message`, the source line, a caret);
// errors in the request (a parameter the function does not have, a type tgrad
// cannot read) are a sentence. Nothing throws across the API.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tgrad/diag/Diagnostics.h"

namespace tgrad {

// A diagnostic that outlives the file it is about: where, how severe, what,
// and its rendering.
struct StoredDiagnostic {
  Severity severity = Severity::Error;
  std::string file;  // as the diagnostic names it; "" where it is about no file
  int line = 0;      // 1-based; 0 where it is about no place in the file
  int column = 0;    // 1-based, in code points
  std::string message;
  std::string rendered;  // "file:line:col: error: message\n", the source line, a caret line
};

struct Error {
  enum class Kind {
    // The request does not fit the kernel or is misspelt: a parameter the
    // function does not have, a type or a value tgrad cannot read, a launch
    // that lacks an argument. The command line's usage errors (exit status 2).
    // The message names the request's field by the command-line flag it
    // comes from (--wrt, -D, --arg, --grid), the notation both share.
    Request,
    // The kernel: a file that cannot be read, or one tgrad reports errors in
    // (`diagnostics`), while reading, typing, differentiating or running it
    // (exit status 1).
    Input,
    // A file tgrad was asked to write cannot be written (exit status 1).
    Output,
  };
  Kind kind = Kind::Input;
  std::string message;  // a sentence; empty where the diagnostics say it all
  // The diagnostics of the call that failed: its errors, with the warnings
  // and notes reported before them, in order.
  std::vector<StoredDiagnostic> diagnostics;

  // The diagnostics' renderings, then "tgrad: error: <message>\n" where
  // there is a message.
  std::string render() const;
};

// A value of type T, or the Error why there is none.
template <class T>
class Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // Only where ok().
  T &value() { return std::get<0>(state_); }
  const T &value() const { return std::get<0>(state_); }
  T &operator*() { return value(); }
  const T &operator*() const { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  // Only where !ok().
  const Error &error() const { return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Success, or the Error why not: Result for calls that give no value.
class Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error &error() const { return error_; }  // only where !ok()

 private:
  Error error_;
  bool failed_ = false;
};

}  // namespace tgrad
