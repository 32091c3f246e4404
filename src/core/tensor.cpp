// Tensor views and Buffer (core/device.hpp).
#include "core/device.hpp"
#include "core/error.hpp"

namespace ridgeline {

Tensor Tensor::cols_slice(int64_t col0, int64_t n) const {
  RIDGELINE_REQUIRE(col0 >= 0 && col0 + n <= cols, "column slice out of range");
  Tensor t = *this;
  t.data = static_cast<char*>(data) + static_cast<size_t>(col0) * dtype_size(dtype);
  t.cols = n;
  return t;
}

Tensor Tensor::rows_slice(int64_t row0, int64_t n) const {
  RIDGELINE_REQUIRE(row0 >= 0 && row0 + n <= rows, "row slice out of range");
  Tensor t = *this;
  t.data = static_cast<char*>(data) + static_cast<size_t>(row0 * ld) * dtype_size(dtype);
  t.rows = n;
  return t;
}

Tensor Tensor::strided_rows(int64_t row0, int64_t n, int64_t step) const {
  RIDGELINE_REQUIRE(row0 >= 0 && step > 0 && row0 + (n - 1) * step < rows,
                    "strided row view out of range");
  Tensor t = rows_slice(row0, 1);
  t.rows = n;
  t.ld = ld * step;
  return t;
}

Tensor Buffer::view(int64_t rows, int64_t cols, DType dtype) const {
  RIDGELINE_REQUIRE(static_cast<size_t>(checked_mul(checked_mul(rows, cols, "view elements"),
                                                    static_cast<int64_t>(dtype_size(dtype)),
                                                    "view bytes")) <= m_bytes,
                    "view larger than its buffer");
  Tensor t;
  t.data = m_data.get();
  t.rows = rows;
  t.cols = cols;
  t.ld = cols;
  t.dtype = dtype;
  return t;
}

} // namespace ridgeline
