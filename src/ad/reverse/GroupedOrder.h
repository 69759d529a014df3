// The grouped program ordering of a 1-D grid (the Triton tutorial matmul's
// "L2 cache optimization"), read as the 2-D grid it enumerates.
//
// A kernel launched over num_pid_m * num_pid_n programs computes its tile's
// row and column from its one program id:
//
//     num_pid_in_group = GROUP_SIZE_M * num_pid_n
//     group_id = pid // num_pid_in_group
//     first_pid_m = group_id * GROUP_SIZE_M
//     group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
//     pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
//     pid_n = (pid % num_pid_in_group) // group_size_m
//
// (or `pid_m = first_pid_m + (pid % group_size_m)`, the tutorial's earlier
// spelling). For pid in [0, num_pid_m * num_pid_n) this maps the programs
// one to one onto [0, num_pid_m) x [0, num_pid_n): group g holds the pids
// g*G*n + r with r in [0, gs*n), gs = min(m - g*G, G), and r -> (r % gs,
// r // gs) is one to one onto [0, gs) x [0, n) (adding a constant to r
// before the `% gs`, as the earlier spelling does, only permutes the
// residues within each column). A sum over the forward's programs is
// therefore a sum over the pairs (pid_m, pid_n), and an owner-computes
// kernel may take pid_m and pid_n as program ids of a 2-D grid.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tgrad/ast/Ast.h"

namespace tgrad::ad::reverse {

// A name no program defines: what the 1-D program id and the grid's size
// become where a grouped ordering is read as a 2-D grid. Read after dead-code
// removal, the kernel uses its program id other than through the ordering.
inline constexpr const char *kGroupedProgramId = "__tgrad_grouped_program_id__";

// The literal axis of `tl.program_id(AXIS)` (or of `fn`, such as
// "tl.num_programs"), -1 for an axis not written as a literal, -2 for any
// other expression.
int program_axis_of(const ast::Expr &e, const char *fn = "tl.program_id");

struct GroupedOrder {
  std::string row, column;                 // the names of the two ids ("pid_m", "pid_n")
  std::string rows_name, columns_name;     // names of the block that hold the counts ("num_pid_m", "num_pid_n")
  std::shared_ptr<const ast::Expr> rows;   // the counts over launch values: tl.cdiv(M, BLOCK_SIZE_M)
  std::shared_ptr<const ast::Expr> columns;
};

// Looks among the top-level statements of `block` before index `end` for a
// grouped ordering of tl.program_id(0). Where it finds one, rewrites `block`
// so that `row = tl.program_id(0)` and `column = tl.program_id(1)`, and every
// other read of tl.program_id(0) or tl.num_programs(0) becomes
// kGroupedProgramId; else leaves `block` as it is and returns nullopt.
std::optional<GroupedOrder> read_grouped_order_as_2d(ast::StmtList &block, size_t end);

}  // namespace tgrad::ad::reverse
