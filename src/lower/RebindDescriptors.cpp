#include "src/lower/RebindDescriptors.h"

#include "src/lower/Walk.h"
#include "tgrad/ast/Walk.h"

namespace tgrad::lower {

using namespace ast;

namespace {

class RebindRenamer {
 public:
  RebindRenamer(const Module &module, std::set<std::string> &taken, std::map<std::string, std::string> &original)
      : module_(module), taken_(taken), original_(original) {}

  void run(StmtList &block) {
    for (size_t k = 0; k < block.size(); ++k) {
      std::string x;
      if (auto *a = dyn_cast<Assign>(block[k].get())) {
        x = rebound(*a);
      } else if (auto *i = dyn_cast<If>(block[k].get())) {
        // Both branches first (one name for the descriptor either makes), then other rebinds inside them.
        const std::string a = branch_rebinds(i->body), b = branch_rebinds(i->orelse);
        if (!a.empty() && a == b) x = a;
        if (x.empty() || assigned_after(block, k + 1, x)) {
          run(i->body);
          run(i->orelse);
          continue;
        }
      } else if (auto *f = dyn_cast<For>(block[k].get())) {
        run(f->body);
      }
      if (x.empty() || assigned_after(block, k + 1, x)) continue;
      std::string fresh = x + "_desc";
      for (int n = 2; taken_.count(fresh); ++n) fresh = x + "_desc" + std::to_string(n);
      taken_.insert(fresh);
      original_[fresh] = x;
      auto rename = [&](ExprPtr &e) {
        if (auto *n = dyn_cast<Name>(e.get()); n && n->id == x) n->id = fresh;
      };
      if (auto *a = dyn_cast<Assign>(block[k].get())) {
        cast<Name>(a->targets[0].get())->id = fresh;
      } else {
        auto *i = cast<If>(block[k].get());
        retarget_branch(i->body, x, fresh);
        retarget_branch(i->orelse, x, fresh);
        run(i->body);
        run(i->orelse);
      }
      StmtList rest;
      for (size_t j = k + 1; j < block.size(); ++j) rest.push_back(std::move(block[j]));
      rewrite_block(rest, rename);
      for (size_t j = k + 1; j < block.size(); ++j) block[j] = std::move(rest[j - k - 1]);
    }
  }

 private:
  // The name `a` rebinds to a descriptor or block pointer made from its own value, or "".
  std::string rebound(const Assign &a) const {
    if (a.targets.size() != 1) return "";
    auto *n = dyn_cast<Name>(a.targets[0].get());
    if (!n || !(is_tl_call(module_, a.value.get(), "make_tensor_descriptor") ||
                is_tl_call(module_, a.value.get(), "make_block_ptr")))
      return "";
    std::set<std::string> read;
    collect_names(*a.value, read);
    return read.count(n->id) ? n->id : "";
  }

  // The one name a branch rebinds at its top level (and assigns nowhere else), or "".
  std::string branch_rebinds(const StmtList &branch) const {
    std::string found;
    for (size_t k = 0; k < branch.size(); ++k)
      if (auto *a = dyn_cast<Assign>(branch[k].get()); a && !rebound(*a).empty()) {
        if (!found.empty()) return "";
        found = rebound(*a);
        if (assigned_after(branch, k + 1, found)) return "";
      }
    return found;
  }

  // The branch's rebinding of x renamed to `fresh`, and its later reads of x.
  void retarget_branch(StmtList &branch, const std::string &x, const std::string &fresh) const {
    bool after = false;
    for (StmtPtr &st : branch) {
      if (after) {
        StmtList one;
        one.push_back(std::move(st));
        rewrite_block(one, [&](ExprPtr &e) {
          if (auto *n = dyn_cast<Name>(e.get()); n && n->id == x) n->id = fresh;
        });
        st = std::move(one[0]);
        continue;
      }
      if (auto *a = dyn_cast<Assign>(st.get()); a && rebound(*a) == x) {
        cast<Name>(a->targets[0].get())->id = fresh;
        after = true;
      }
    }
  }

  static bool assigned_after(const StmtList &block, size_t from, const std::string &x) {
    std::map<std::string, int> assigned;
    for (size_t j = from; j < block.size(); ++j) stmt_assignments(*block[j], assigned);
    return assigned.count(x) > 0;
  }

  const Module &module_;
  std::set<std::string> &taken_;
  std::map<std::string, std::string> &original_;  // a fresh name -> the user's
};

}  // namespace

void rename_rebound_descriptors(const Module &module, StmtList &body, std::set<std::string> &taken,
                                std::map<std::string, std::string> &original) {
  RebindRenamer(module, taken, original).run(body);
}

}  // namespace tgrad::lower
