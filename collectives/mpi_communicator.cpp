// MPI implementation of Communicator: non-blocking collectives tied to a host "stream" tag,
// completed by complete(stream); blocking when the stream is null. bf16/fp16 reductions use
// user-defined MPI operations that accumulate in fp32.
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/half_types.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
  case DType::f32:
    return MPI_FLOAT;
  case DType::i32:
    return MPI_INT32_T;
  case DType::bf16:
  case DType::f16:
    return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

template <typename Convert>
void reduce_16(const uint16_t* in, uint16_t* inout, int n, ReduceOp op, Convert conv) {
  for (int i = 0; i < n; ++i) {
    const float a = conv.to_float(in[i]);
    const float b = conv.to_float(inout[i]);
    float r = 0;
    switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      r = a + b;
      break;
    case ReduceOp::prod:
      r = a * b;
      break;
    case ReduceOp::max:
      r = a > b ? a : b;
      break;
    case ReduceOp::min:
      r = a < b ? a : b;
      break;
    }
    inout[i] = conv.from_float(r);
  }
}

struct Bf16Conv {
  float to_float(uint16_t v) const { return bf16_to_float(v); }
  uint16_t from_float(float v) const { return float_to_bf16(v); }
};
struct F16Conv {
  float to_float(uint16_t v) const { return f16_to_float(v); }
  uint16_t from_float(float v) const { return float_to_f16(v); }
};

template <ReduceOp Op, typename Conv> void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_16(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), *len, Op, Conv{});
}

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(MPI_Comm comm) {
    RIDGELINE_CHECK(MPI_Comm_dup(comm, &m_comm));
    RIDGELINE_CHECK(MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN));
    RIDGELINE_CHECK(MPI_Comm_rank(m_comm, &m_rank));
    RIDGELINE_CHECK(MPI_Comm_size(m_comm, &m_size));
  }
  ~MpiCommunicator() override {
    for (auto& kv : m_pending)
      if (!kv.second.empty())
        RIDGELINE_CHECK_NOTHROW(
            MPI_Waitall(static_cast<int>(kv.second.size()), kv.second.data(), MPI_STATUSES_IGNORE));
    for (auto& kv : m_ops)
      RIDGELINE_CHECK_NOTHROW(MPI_Op_free(&kv.second));
    RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&m_comm));
  }

  int rank() const override { return m_rank; }
  int size() const override { return m_size; }
  const char* backend() const override { return "mpi"; }
  bool stream_ordered() const override { return false; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                  Stream stream) override {
    const int n = to_int(count);
    const void* src = send == recv ? MPI_IN_PLACE : send;
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Iallreduce(src, recv, n, mpi_type(dtype), mpi_op(dtype, op), m_comm, &req));
    finish(req, stream, op == ReduceOp::avg ? Post{recv, count, dtype} : Post{});
  }

  void all_gather(const void* send, void* recv, size_t send_count, DType dtype,
                  Stream stream) override {
    const size_t bytes = send_count * dtype_size(dtype);
    const void* src = send;
    if (send == static_cast<char*>(recv) + static_cast<size_t>(m_rank) * bytes) src = MPI_IN_PLACE;
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Iallgather(src, to_int(send_count), mpi_type(dtype), recv,
                                   to_int(send_count), mpi_type(dtype), m_comm, &req));
    finish(req, stream, Post{});
  }

  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                      Stream stream) override {
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Ireduce_scatter_block(send == recv ? MPI_IN_PLACE : send, recv,
                                              to_int(recv_count), mpi_type(dtype),
                                              mpi_op(dtype, op), m_comm, &req));
    finish(req, stream, op == ReduceOp::avg ? Post{recv, recv_count, dtype} : Post{});
  }

  void all_to_all(const void* send, void* recv, size_t count, DType dtype, Stream stream) override {
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Ialltoall(send == recv ? MPI_IN_PLACE : send, to_int(count),
                                  mpi_type(dtype), recv, to_int(count), mpi_type(dtype), m_comm,
                                  &req));
    finish(req, stream, Post{});
  }

  void all_to_all_v(const void* send, const std::vector<size_t>& send_counts,
                    const std::vector<size_t>& send_offsets, void* recv,
                    const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_offsets,
                    DType dtype, Stream stream) override {
    // MPI keeps pointers to the int arrays until the request completes: they live in m_v_args
    // (one set per stream) until then.
    std::vector<int>& a = m_v_args[stream].emplace_back();
    for (const std::vector<size_t>* v : {&send_counts, &send_offsets, &recv_counts, &recv_offsets})
      for (size_t x : *v)
        a.push_back(to_int(x));
    const int n = m_size;
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Ialltoallv(send, a.data(), a.data() + n, mpi_type(dtype), recv,
                                   a.data() + 2 * n, a.data() + 3 * n, mpi_type(dtype), m_comm,
                                   &req));
    finish(req, stream, Post{});
  }

  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root,
                 Stream stream) override {
    if (m_rank == root && send != recv) std::memcpy(recv, send, count * dtype_size(dtype));
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Ibcast(recv, to_int(count), mpi_type(dtype), root, m_comm, &req));
    finish(req, stream, Post{});
  }

  void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
              Stream stream) override {
    const void* src = (send == recv && m_rank == root) ? MPI_IN_PLACE : send;
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Ireduce(src, recv, to_int(count), mpi_type(dtype), mpi_op(dtype, op), root,
                                m_comm, &req));
    finish(req, stream, op == ReduceOp::avg && m_rank == root ? Post{recv, count, dtype} : Post{});
  }

  void send(const void* buf, size_t count, DType dtype, int peer, Stream stream) override {
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Isend(buf, to_int(count), mpi_type(dtype), peer, 0, m_comm, &req));
    queue(req, stream);
  }

  void recv(void* buf, size_t count, DType dtype, int peer, Stream stream) override {
    MPI_Request req;
    RIDGELINE_CHECK(MPI_Irecv(buf, to_int(count), mpi_type(dtype), peer, 0, m_comm, &req));
    queue(req, stream);
  }

  void group_start() override { ++m_group_depth; }
  void group_end() override {
    if (m_group_depth <= 0) throw Error("MpiCommunicator: group_end() without group_start()");
    if (--m_group_depth == 0) complete(nullptr);
  }

  void complete(Stream stream) override {
    auto it = m_pending.find(stream);
    if (it != m_pending.end() && !it->second.empty()) {
      RIDGELINE_CHECK(
          MPI_Waitall(static_cast<int>(it->second.size()), it->second.data(), MPI_STATUSES_IGNORE));
      it->second.clear();
    }
    m_v_args.erase(stream);
    auto pit = m_post.find(stream);
    if (pit != m_post.end()) {
      for (const Post& p : pit->second)
        divide(p);
      pit->second.clear();
    }
  }

private:
  struct Post { // deferred averaging after a sum (MPI has no average op)
    void* buf = nullptr;
    size_t count = 0;
    DType dtype = DType::f32;
  };

  static int to_int(size_t count) {
    if (count > static_cast<size_t>(INT32_MAX))
      throw Error("MPI backend: element count " + std::to_string(count) + " exceeds INT_MAX");
    return static_cast<int>(count);
  }

  void queue(MPI_Request req, Stream stream) { m_pending[stream].push_back(req); }

  // Blocking when stream is null and no group is open; otherwise deferred to complete().
  void finish(MPI_Request req, Stream stream, Post post) {
    queue(req, stream);
    if (post.buf) m_post[stream].push_back(post);
    if (stream == nullptr && m_group_depth == 0) complete(nullptr);
  }

  void divide(const Post& p) const {
    const float inv = 1.0f / static_cast<float>(m_size);
    if (p.dtype == DType::f32) {
      float* v = static_cast<float*>(p.buf);
      for (size_t i = 0; i < p.count; ++i)
        v[i] *= inv;
    } else if (p.dtype == DType::i32) {
      int32_t* v = static_cast<int32_t*>(p.buf);
      for (size_t i = 0; i < p.count; ++i)
        v[i] /= m_size;
    } else {
      uint16_t* v = static_cast<uint16_t*>(p.buf);
      for (size_t i = 0; i < p.count; ++i)
        v[i] = p.dtype == DType::bf16 ? float_to_bf16(bf16_to_float(v[i]) * inv)
                                      : float_to_f16(f16_to_float(v[i]) * inv);
    }
  }

  MPI_Op mpi_op(DType dtype, ReduceOp op) {
    if (dtype == DType::f32 || dtype == DType::i32) {
      switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        return MPI_SUM;
      case ReduceOp::prod:
        return MPI_PROD;
      case ReduceOp::max:
        return MPI_MAX;
      case ReduceOp::min:
        return MPI_MIN;
      }
    }
    const ReduceOp base = op == ReduceOp::avg ? ReduceOp::sum : op;
    const int key = static_cast<int>(dtype) * 16 + static_cast<int>(base);
    auto it = m_ops.find(key);
    if (it != m_ops.end()) return it->second;
    MPI_User_function* fn = nullptr;
    const bool bf = dtype == DType::bf16;
    switch (base) {
    case ReduceOp::sum:
      fn = bf ? half_op<ReduceOp::sum, Bf16Conv> : half_op<ReduceOp::sum, F16Conv>;
      break;
    case ReduceOp::prod:
      fn = bf ? half_op<ReduceOp::prod, Bf16Conv> : half_op<ReduceOp::prod, F16Conv>;
      break;
    case ReduceOp::max:
      fn = bf ? half_op<ReduceOp::max, Bf16Conv> : half_op<ReduceOp::max, F16Conv>;
      break;
    case ReduceOp::min:
      fn = bf ? half_op<ReduceOp::min, Bf16Conv> : half_op<ReduceOp::min, F16Conv>;
      break;
    case ReduceOp::avg:
      break;
    }
    MPI_Op created;
    RIDGELINE_CHECK(MPI_Op_create(fn, 1, &created));
    m_ops[key] = created;
    return created;
  }

  MPI_Comm m_comm = MPI_COMM_NULL;
  int m_rank = 0;
  int m_size = 1;
  int m_group_depth = 0;
  std::map<Stream, std::vector<MPI_Request>> m_pending;
  std::map<Stream, std::vector<Post>> m_post;
  std::map<Stream, std::deque<std::vector<int>>> m_v_args; ///< all_to_all_v's counts in flight
  std::map<int, MPI_Op> m_ops;
};

} // namespace

void Communicator::all_to_all_v(const void* send, const std::vector<size_t>& send_counts,
                                const std::vector<size_t>& send_offsets, void* recv,
                                const std::vector<size_t>& recv_counts,
                                const std::vector<size_t>& recv_offsets, DType dtype,
                                Stream stream) {
  const size_t n = static_cast<size_t>(size()), e = dtype_size(dtype);
  if (send_counts.size() != n || send_offsets.size() != n || recv_counts.size() != n ||
      recv_offsets.size() != n)
    throw Error("all_to_all_v: counts and offsets need one entry per rank of the group");
  group_start();
  for (size_t peer = 0; peer < n; ++peer) {
    if (send_counts[peer] > 0)
      this->send(static_cast<const char*>(send) + send_offsets[peer] * e, send_counts[peer], dtype,
                 static_cast<int>(peer), stream);
    if (recv_counts[peer] > 0)
      this->recv(static_cast<char*>(recv) + recv_offsets[peer] * e, recv_counts[peer], dtype,
                 static_cast<int>(peer), stream);
  }
  group_end();
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
  case ReduceOp::sum:
    return "sum";
  case ReduceOp::prod:
    return "prod";
  case ReduceOp::max:
    return "max";
  case ReduceOp::min:
    return "min";
  case ReduceOp::avg:
    return "avg";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& name) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg})
    if (name == reduce_op_name(op)) return op;
  throw UsageError("unknown reduction '" + name + "' (expected sum, prod, max, min or avg)");
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) {
  return std::make_unique<MpiCommunicator>(comm);
}

} // namespace ridgeline
