// The in-process communicator. A collective is two barriers:
//   publish: each rank posts its call (x, out); once all have, every rank
//            checks that the calls agree and then works on its own share,
//            reading the other ranks' tensors;
//   finish:  no rank returns (and may reuse or free its tensors) until every
//            rank is done reading.
// Every rank sees the same posted calls, so all of them reach the same
// verdict on a mismatch and all of them throw. The work is split between the
// rank threads themselves rather than given to ThreadPool::global(): the pool
// serves one caller at a time, and a rank that waited for the others while
// holding it would deadlock them.
//
// std::barrier cannot be interrupted, hence a condition-variable barrier with
// a generation count and an aborted flag.
#include "backend/cpu/cpu_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

#include "tensor/dtype.h"
#include "util/status.h"

namespace hyllm {

namespace {

enum class CallKind { kAllReduce, kAllGatherColumns };

struct PostedCall {
  CallKind kind = CallKind::kAllReduce;
  TensorView x, out;
};

const char* kind_name(CallKind k) { return k == CallKind::kAllReduce ? "all_reduce" : "all_gather_columns"; }

std::string describe(const PostedCall& c) {
  return fmt::format("{}(x {} {}, out {} {})", kind_name(c.kind), dtype_name(c.x.dtype()), c.x.shape().str(),
                     dtype_name(c.out.dtype()), c.out.shape().str());
}

bool same_call(const PostedCall& a, const PostedCall& b) {
  return a.kind == b.kind && a.x.dtype() == b.x.dtype() && a.x.shape() == b.x.shape() &&
         a.out.dtype() == b.out.dtype() && a.out.shape() == b.out.shape();
}

class Group {
 public:
  explicit Group(int size) : size_(size), calls_(static_cast<size_t>(size)) {}
  int size() const { return size_; }

  // Posts rank's call and waits for all ranks to post theirs. Afterwards the
  // posted calls stay put until finish() returns on every rank.
  void publish(int rank, const PostedCall& call) {
    std::unique_lock lk(mu_);
    if (aborted_) throw_aborted(lk);
    calls_[static_cast<size_t>(rank)] = call;
    if (!arrive_and_wait(lk, [this] { reading_ = size_; })) throw_aborted(lk);
  }

  // Called by every rank after publish() (whatever it did in between, which
  // must not throw): this rank has stopped reading the others' tensors; waits
  // until all have.
  void finish() {
    std::unique_lock lk(mu_);
    if (--reading_ == 0) cv_.notify_all();
    if (aborted_ || !arrive_and_wait(lk, [] {})) throw_aborted(lk);
  }

  void abort() {
    std::lock_guard lk(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

  // Between publish() and finish(): the calls as posted, the same on every rank.
  const PostedCall& call(int rank) const { return calls_[static_cast<size_t>(rank)]; }

  // Empty when all ranks posted the same call; else why not.
  std::string mismatch() const {
    for (int r = 1; r < size_; ++r) {
      if (!same_call(call(0), call(r))) {
        return fmt::format("the ranks disagree: rank 0 calls {}, rank {} calls {}", describe(call(0)), r,
                           describe(call(r)));
      }
    }
    return {};
  }

 private:
  // True once all ranks arrived (the last one runs on_complete under the
  // lock); false when the group was aborted first.
  template <typename OnComplete>
  bool arrive_and_wait(std::unique_lock<std::mutex>& lk, OnComplete on_complete) {
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      on_complete();
      cv_.notify_all();
      return true;
    }
    cv_.wait(lk, [&] { return generation_ != generation || aborted_; });
    return generation_ != generation;
  }

  // A rank leaves an aborted group only when no rank still reads its tensors.
  [[noreturn]] void throw_aborted(std::unique_lock<std::mutex>& lk) {
    cv_.wait(lk, [this] { return reading_ == 0; });
    fail(ErrorCode::kInternal, "tensor parallelism: the communicator group was aborted");
  }

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  int reading_ = 0;  // ranks past publish() that may still read other ranks' tensors
  bool aborted_ = false;
  std::vector<PostedCall> calls_;
};

float load(const TensorView& t, int64_t i) {
  return t.dtype() == DType::kF32 ? t.data_as<const float>()[i] : bf16_to_f32(t.data_as<const uint16_t>()[i]);
}

void store(const TensorView& t, int64_t i, float v) {
  if (t.dtype() == DType::kF32) t.data_as<float>()[i] = v;
  else t.data_as<uint16_t>()[i] = f32_to_bf16(v);
}

class CpuCommunicator final : public Communicator {
 public:
  CpuCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  void all_reduce(const TensorView& x, const TensorView& out) override {
    collective({CallKind::kAllReduce, x, out}, [this] { reduce_share(); });
  }

  void all_gather_columns(const TensorView& x, const TensorView& out) override {
    collective({CallKind::kAllGatherColumns, x, out}, [this] { gather_into_own_out(); });
  }

  void abort() override { group_->abort(); }

 private:
  template <typename Work>
  void collective(const PostedCall& call, Work work) {
    group_->publish(rank_, call);
    const std::string mismatch = group_->mismatch();
    if (mismatch.empty()) work();
    group_->finish();
    if (!mismatch.empty()) fail(ErrorCode::kInvalidArgument, "{}: {}", kind_name(call.kind), mismatch);
  }

  // This rank sums elements [begin, end) of every rank's x in rank order and
  // writes the sum, rounded once, to every rank's out. Each element is read
  // and written by one rank only, and all of its reads precede its writes,
  // so out may be x on any rank.
  void reduce_share() const {
    const int ranks = size();
    const int64_t n = group_->call(0).x.numel();
    const int64_t begin = n * rank_ / ranks, end = n * (rank_ + 1) / ranks;
    constexpr int64_t kBlock = 512;
    float acc[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t m = std::min(kBlock, end - b);
      const TensorView& x0 = group_->call(0).x;
      for (int64_t i = 0; i < m; ++i) acc[i] = load(x0, b + i);
      for (int q = 1; q < ranks; ++q) {
        const TensorView& xq = group_->call(q).x;
        for (int64_t i = 0; i < m; ++i) acc[i] += load(xq, b + i);
      }
      for (int q = 0; q < ranks; ++q) {
        const TensorView& outq = group_->call(q).out;
        for (int64_t i = 0; i < m; ++i) store(outq, b + i, acc[i]);
      }
    }
  }

  // This rank copies every rank's x into its own out's column blocks.
  void gather_into_own_out() const {
    const TensorView& out = group_->call(rank_).out;
    const int64_t R = out.dim(0), N = out.dim(1), w = group_->call(0).x.dim(1);
    const size_t elem = dtype_size(out.dtype());
    for (int q = 0; q < size(); ++q) {
      const int64_t first = q * w, cols = std::min(w, N - first);
      if (cols <= 0) break;
      const char* src = static_cast<const char*>(group_->call(q).x.data());
      char* dst = static_cast<char*>(out.data());
      for (int64_t r = 0; r < R; ++r) {
        std::memcpy(dst + (r * N + first) * elem, src + r * w * elem, static_cast<size_t>(cols) * elem);
      }
    }
  }

  std::shared_ptr<Group> group_;
  const int rank_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_cpu_communicators(int size) {
  if (size < 1) fail(ErrorCode::kInvalidArgument, "a communicator group needs at least one rank, got {}", size);
  auto group = std::make_shared<Group>(size);
  std::vector<std::shared_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_shared<CpuCommunicator>(group, r));
  return comms;
}

}  // namespace hyllm
