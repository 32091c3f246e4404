// A recording sink for ridgeline's profiler ranges (core/ranges.hpp) and the checks every range
// test makes: pushes and pops in pairs, properly nested, and each range's enclosing range.
#pragma once

#include <string>
#include <vector>

#include "core/ranges.hpp"

namespace ridgeline {

class RangeLog final : public ranges::Sink {
public:
  struct Range {
    std::string name;
    std::string parent; ///< the enclosing range's name ("" at the top)
    size_t depth = 0;   ///< 0 at the top
  };

  RangeLog() { m_previous = ranges::set_sink(this); }
  ~RangeLog() override { ranges::set_sink(m_previous); }
  RangeLog(const RangeLog&) = delete;
  RangeLog& operator=(const RangeLog&) = delete;

  void push(const char* name) override {
    m_ranges.push_back({name, m_open.empty() ? std::string() : m_open.back(), m_open.size()});
    m_open.emplace_back(name);
    ++m_pushes;
  }
  void pop() override {
    ++m_pops;
    if (m_open.empty())
      ++m_unmatched_pops;
    else
      m_open.pop_back();
  }

  /// Every range opened, in order.
  const std::vector<Range>& ranges() const { return m_ranges; }
  /// Ranges still open (pushed, not yet popped), outermost first.
  const std::vector<std::string>& open() const { return m_open; }
  size_t pushes() const { return m_pushes; }
  size_t pops() const { return m_pops; }
  /// Pops that found no open range (a pop without its push).
  size_t unmatched_pops() const { return m_unmatched_pops; }

private:
  ranges::Sink* m_previous = nullptr;
  std::vector<Range> m_ranges;
  std::vector<std::string> m_open;
  size_t m_pushes = 0, m_pops = 0, m_unmatched_pops = 0;
};

} // namespace ridgeline
