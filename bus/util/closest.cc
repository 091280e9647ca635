#include "bus/util/closest.h"

#include <algorithm>
#include <utility>

namespace walbus::internal {
namespace {

// Levenshtein distance, one row at a time.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> ClosestNames(std::string_view name, const std::vector<std::string>& candidates, size_t max) {
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::vector<std::pair<size_t, size_t>> near;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    const size_t d = EditDistance(name, candidates[i]);
    if (d <= limit) near.emplace_back(d, i);
  }
  std::stable_sort(near.begin(), near.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < near.size() && out.size() < max; ++i) out.push_back(candidates[near[i].second]);
  return out;
}

}  // namespace walbus::internal
