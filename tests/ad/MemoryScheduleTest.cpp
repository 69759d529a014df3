// Where a load's gradient is written (src/ad/reverse/MemorySchedule.h): one
// case per way of writing, and the facts that move a load from one to another.
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "src/ad/reverse/MemorySchedule.h"

namespace tgrad::testing {
namespace {

using ad::AccessDecision;
using ad::reverse::BufferFacts;
using ad::reverse::decide_gradient_write;
using ad::reverse::GradientWrite;
using ad::reverse::LoadFacts;
using ad::reverse::WriteDecision;

LoadFacts load(AccessDecision::Kind kind, int loop_depth = 0, bool in_branch = false) {
  LoadFacts f;
  f.access.kind = kind;
  f.access.reason = "the analysis's reason";
  f.loop_depth = loop_depth;
  f.in_branch = in_branch;
  f.register_tile_fits = true;
  return f;
}

BufferFacts buffer(int loads = 1, int written_before = 0) {
  BufferFacts b;
  b.base = "w_ptr";
  b.programs_loopable = true;
  b.loads = loads;
  b.mask_variants = 1;
  b.written_before = written_before;
  return b;
}

TEST(MemorySchedule, BroadcastLoadOutsideLoopsSumsInRegisters) {
  WriteDecision d = decide_gradient_write(load(AccessDecision::Kind::Broadcast), buffer());
  EXPECT_EQ(d.how, GradientWrite::RegisterPartialSum);
  EXPECT_FALSE(d.buffer_starts_at_zero);
  EXPECT_FALSE(d.counts_as_written);
  EXPECT_NE(d.comment.find("'w_ptr'"), std::string::npos);
}

TEST(MemorySchedule, BroadcastLoadInALoopOrWithoutARegisterTileAddsToItsRow) {
  EXPECT_EQ(decide_gradient_write(load(AccessDecision::Kind::Broadcast, 1), buffer()).how, GradientWrite::PartialSumRow);
  EXPECT_EQ(decide_gradient_write(load(AccessDecision::Kind::Broadcast, 0, true), buffer()).how,
            GradientWrite::PartialSumRow);
  EXPECT_EQ(decide_gradient_write(load(AccessDecision::Kind::Broadcast), buffer(2)).how, GradientWrite::PartialSumRow);
  LoadFacts no_tile = load(AccessDecision::Kind::Broadcast);
  no_tile.register_tile_fits = false;
  EXPECT_EQ(decide_gradient_write(std::move(no_tile), buffer()).how, GradientWrite::PartialSumRow);
}

TEST(MemorySchedule, BroadcastLoadIsAtomicWhereTheBackwardCannotLoopOverPrograms) {
  BufferFacts b = buffer();
  b.programs_loopable = false;
  WriteDecision d = decide_gradient_write(load(AccessDecision::Kind::Broadcast), b);
  EXPECT_EQ(d.how, GradientWrite::Atomic);
  EXPECT_TRUE(d.buffer_starts_at_zero);
  EXPECT_EQ(d.access.kind, AccessDecision::Kind::Shared);
  EXPECT_NE(d.access.reason.find("cannot loop over them"), std::string::npos);
}

TEST(MemorySchedule, OneSharedLoadMakesEveryLoadOfTheBufferAtomic) {
  BufferFacts b = buffer(2);
  b.shared_reason = "line 7 may meet another program's addresses";
  WriteDecision d = decide_gradient_write(load(AccessDecision::Kind::Injective), b);
  EXPECT_EQ(d.how, GradientWrite::Atomic);
  EXPECT_EQ(d.access.reason, b.shared_reason);
  EXPECT_EQ(d.comment, "atomic: " + b.shared_reason);
}

TEST(MemorySchedule, TheFirstInjectiveLoadIsAPlainStoreAndLaterOnesAdd) {
  WriteDecision first = decide_gradient_write(load(AccessDecision::Kind::Injective), buffer(2, 0));
  EXPECT_EQ(first.how, GradientWrite::PlainStore);
  EXPECT_FALSE(first.buffer_starts_at_zero);
  EXPECT_TRUE(first.counts_as_written);
  WriteDecision second = decide_gradient_write(load(AccessDecision::Kind::Injective), buffer(2, 1));
  EXPECT_EQ(second.how, GradientWrite::AddToEarlier);
  EXPECT_FALSE(second.buffer_starts_at_zero);  // the plain store wrote every address first
  EXPECT_NE(second.comment.find("loaded 2 times"), std::string::npos);
}

TEST(MemorySchedule, APlainStoreUnderARuntimeIfNeedsAZeroedBuffer) {
  WriteDecision d = decide_gradient_write(load(AccessDecision::Kind::Injective, 0, true), buffer());
  EXPECT_EQ(d.how, GradientWrite::PlainStore);
  EXPECT_TRUE(d.buffer_starts_at_zero);
}

TEST(MemorySchedule, ALoopThatRereadsItsAddressesAdds) {
  WriteDecision rereads = decide_gradient_write(load(AccessDecision::Kind::Injective, 1), buffer());
  EXPECT_EQ(rereads.how, GradientWrite::AddToEarlier);
  EXPECT_TRUE(rereads.buffer_starts_at_zero);
  EXPECT_NE(rereads.comment.find("every iteration"), std::string::npos);
  LoadFacts walks = load(AccessDecision::Kind::Injective, 1);
  walks.access.walks_loop = true;
  EXPECT_EQ(decide_gradient_write(std::move(walks), buffer()).how, GradientWrite::PlainStore);
}

TEST(MemorySchedule, AnInPlaceBufferAddsToTheGradientOfWhatPassesThrough) {
  BufferFacts b = buffer();
  b.in_place = true;
  WriteDecision d = decide_gradient_write(load(AccessDecision::Kind::Injective), b);
  EXPECT_EQ(d.how, GradientWrite::AddToEarlier);
  EXPECT_NE(d.comment.find("updated in place"), std::string::npos);
}

TEST(MemorySchedule, AnAssumedInjectiveLoadSaysWhatItAssumes) {
  LoadFacts f = load(AccessDecision::Kind::InjectiveAssuming);
  f.access.assumption = std::make_unique<ast::Name>("stride_ok", SourceSpan{});
  WriteDecision d = decide_gradient_write(std::move(f), buffer());
  EXPECT_EQ(d.how, GradientWrite::PlainStore);
  EXPECT_EQ(d.what, "plain store, assuming stride_ok");
  ASSERT_TRUE(d.access.assumption);  // the caller emits its tl.device_assert
}

}  // namespace
}  // namespace tgrad::testing
