#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace memd::transfer {

/// A first-in first-out queue over a ring of reusable cells: after it has
/// grown to the most a lane keeps in flight, pushing and popping allocate
/// nothing (a std::deque frees and allocates blocks as it goes). Not
/// thread-safe.
template <typename T>
class ChunkFifo {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  T& front() { return cells_[head_]; }

  void push(T value) {
    if (size_ == cells_.size()) Grow();
    cells_[(head_ + size_) % cells_.size()] = std::move(value);
    ++size_;
  }
  void pop() {
    cells_[head_] = T();  // Lets go of what the cell held (a record).
    head_ = (head_ + 1) % cells_.size();
    --size_;
  }

 private:
  void Grow() {
    std::vector<T> grown(cells_.empty() ? 8 : cells_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) {
      grown[i] = std::move(cells_[(head_ + i) % cells_.size()]);
    }
    cells_ = std::move(grown);
    head_ = 0;
  }

  std::vector<T> cells_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace memd::transfer
