#include "engine/serve/prefix_cache.h"

namespace temper::engine {

PrefixCache::PrefixCache(Backend& backend) : backend_(backend) {}

PrefixCache::~PrefixCache() {
  for (auto& [tick, node] : lru_) (void)backend_.ReleaseSnapshot(node->snapshot);
}

void PrefixCache::Touch(Node* node) {
  lru_.erase(node->last_used);
  node->last_used = ++clock_;
  lru_[node->last_used] = node;
}

template <typename Visit>
std::pair<PrefixCache::Node*, size_t> PrefixCache::Descend(std::span<const int32_t> tokens, Visit visit) {
  Node* node = &root_;
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    if (pos + child->edge.size() > tokens.size() ||
        !std::equal(child->edge.begin(), child->edge.end(), tokens.begin() + static_cast<long>(pos))) {
      break;
    }
    if (!visit(child, pos + child->edge.size())) break;
    pos += child->edge.size();
    node = child;
  }
  return {node, pos};
}

PrefixCache::Match PrefixCache::Lookup(std::span<const int32_t> tokens, int64_t max_length) {
  Node* best = nullptr;
  Descend(tokens, [&](Node* node, size_t matched) {
    if (static_cast<int64_t>(matched) > max_length) return false;
    if (node->snapshot >= 0) best = node;
    return true;
  });
  if (best == nullptr) return {};
  Touch(best);
  int64_t length = 0;
  for (const Node* n = best; n != &root_; n = n->parent) length += static_cast<int64_t>(n->edge.size());
  return {best->snapshot, length};
}

Result<bool> PrefixCache::Insert(std::span<const int32_t> tokens, SequenceId seq) {
  if (tokens.empty()) return false;
  // Already cached? (Checked before taking a snapshot, and the tree is changed only after, because
  // evicting to make room prunes nodes.)
  {
    auto [node, pos] = Descend(tokens, [](Node*, size_t) { return true; });
    if (pos == tokens.size() && node->snapshot >= 0) {
      Touch(node);
      return false;
    }
  }
  Result<SnapshotId> snap = backend_.TakeSnapshot(seq);
  while (!snap.ok() && snap.status().code() == StatusCode::kResourceExhausted && EvictOne()) {
    snap = backend_.TakeSnapshot(seq);
  }
  if (!snap.ok()) {
    if (snap.status().code() == StatusCode::kResourceExhausted) return false;
    return snap.status();
  }

  Node* node = &root_;
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(tokens.begin() + static_cast<long>(pos), tokens.end());
      leaf->parent = node;
      Node* raw = leaf.get();
      node->children[tokens[pos]] = std::move(leaf);
      node = raw;
      pos = tokens.size();
      break;
    }
    Node* child = it->second.get();
    size_t common = 0;
    while (common < child->edge.size() && pos + common < tokens.size() && child->edge[common] == tokens[pos + common]) {
      ++common;
    }
    if (common < child->edge.size()) {
      // Split the edge: a new node holds the shared part, the old child hangs below it.
      auto mid = std::make_unique<Node>();
      mid->edge.assign(child->edge.begin(), child->edge.begin() + static_cast<long>(common));
      mid->parent = node;
      std::unique_ptr<Node> old = std::move(it->second);
      old->edge.erase(old->edge.begin(), old->edge.begin() + static_cast<long>(common));
      old->parent = mid.get();
      const int32_t key = old->edge.front();
      mid->children[key] = std::move(old);
      child = mid.get();
      it->second = std::move(mid);
    }
    node = child;
    pos += common;
  }
  node->snapshot = *snap;
  Touch(node);
  return true;
}

bool PrefixCache::EvictOne() {
  if (lru_.empty()) return false;
  Node* node = lru_.begin()->second;
  lru_.erase(lru_.begin());
  (void)backend_.ReleaseSnapshot(node->snapshot);
  node->snapshot = -1;
  Prune(node);
  return true;
}

void PrefixCache::Prune(Node* node) {
  while (node != &root_ && node->snapshot < 0) {
    Node* parent = node->parent;
    const int32_t key = node->edge.front();
    if (node->children.empty()) {
      parent->children.erase(key);  // destroys node
      node = parent;
      continue;
    }
    if (node->children.size() == 1) {
      std::unique_ptr<Node> child = std::move(node->children.begin()->second);
      child->edge.insert(child->edge.begin(), node->edge.begin(), node->edge.end());
      child->parent = parent;
      parent->children[key] = std::move(child);  // destroys node
    }
    return;
  }
}

}  // namespace temper::engine
