#include "src/ad/IssueEarly.h"

#include <map>

#include "src/ad/AnfWalk.h"

namespace tgrad::ad {

using namespace ast;

size_t issue_early(StmtList &block, const std::set<const Stmt *> &movable) {
  size_t moved = 0;
  for (size_t k = 0; k < block.size(); ++k) {
    Stmt &s = *block[k];
    if (auto *f = dyn_cast<For>(&s)) moved += issue_early(f->body, movable);
    if (auto *i = dyn_cast<If>(&s)) {
      moved += issue_early(i->body, movable);
      moved += issue_early(i->orelse, movable);
    }
    if (!movable.count(&s)) continue;
    std::set<std::string> needs;
    stmt_reads(s, needs);
    size_t to = k;
    while (to > 0) {
      std::map<std::string, int> assigned;
      stmt_assignments(*block[to - 1], assigned);
      bool depends = false;
      for (const auto &a : assigned) depends |= needs.count(a.first) > 0;
      if (depends) break;
      --to;
    }
    if (to == k) continue;
    StmtPtr load = std::move(block[k]);
    block.erase(block.begin() + static_cast<std::ptrdiff_t>(k));
    if (!load->leading_comment.empty() && k < block.size() && block[k]->leading_comment.empty()) {
      const std::string &c = load->leading_comment;
      block[k]->leading_comment = c.substr(0, c.find('\n'));
    }
    load->leading_comment += std::string(load->leading_comment.empty() ? "" : "\n") +
                             "(Loaded early: nothing in the backward writes this memory.)";
    block.insert(block.begin() + static_cast<std::ptrdiff_t>(to), std::move(load));
    ++moved;
  }
  return moved;
}

}  // namespace tgrad::ad
