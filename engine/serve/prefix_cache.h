// PrefixCache: which token prefixes the backend holds a snapshot of, as a radix tree over token ids.
//
// The agent loop resends long, mostly shared prompts (system prompt, rule text, memory, earlier
// turns). Gemma 4's sliding layers make a cached prefix usable only where the last `window`
// tokens of sliding-layer state were pinned, so entries sit at checkpoints (message boundaries,
// prompt ends, turn ends) and each holds one backend snapshot: full-layer pages shared by
// reference count, the sliding window copied. A prompt that matches further than the deepest
// checkpoint on its path forks from that checkpoint and re-prefills only the tail after it.
// Entries are evicted least recently used first, when the scheduler needs pages or snapshot slots.
//
// Thread safety: none; the scheduler's thread owns it. Ownership: holds a reference to the
// backend (which must outlive it) and releases every snapshot it holds when destroyed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/backend.h"

namespace temper::engine {

class PrefixCache {
 public:
  explicit PrefixCache(Backend& backend);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Match {
    SnapshotId snapshot = -1;  // -1: no cached prefix
    int64_t length = 0;        // tokens the snapshot covers
  };
  // The longest cached prefix of `tokens` that is at most `max_length` long; marks it used.
  Match Lookup(std::span<const int32_t> tokens, int64_t max_length);

  // Pins `seq`, whose cache holds exactly `tokens`, as the entry for that prefix; evicts the least
  // recently used entries when the backend has no snapshot slot left. Returns false (and changes
  // nothing) when the prefix is already cached or no slot can be had; other backend errors are
  // returned.
  Result<bool> Insert(std::span<const int32_t> tokens, SequenceId seq);

  // Releases the least recently used entry; false when the cache is empty.
  bool EvictOne();

  int64_t entries() const { return static_cast<int64_t>(lru_.size()); }

 private:
  struct Node {
    std::vector<int32_t> edge;  // tokens from the parent to this node
    Node* parent = nullptr;
    std::map<int32_t, std::unique_ptr<Node>> children;  // by the first token of their edge
    SnapshotId snapshot = -1;
    uint64_t last_used = 0;  // key in lru_ while snapshot >= 0
  };
  void Touch(Node* node);
  // Follows the edges that `tokens` match whole, from the root. For each node reached, calls
  // visit(node, tokens matched so far); stops before a node for which it returns false. Returns the
  // last node reached (the root when none) and the tokens matched up to it.
  template <typename Visit>
  std::pair<Node*, size_t> Descend(std::span<const int32_t> tokens, Visit visit);
  // Removes `node` if it holds nothing, and merges a lone child into a parent that holds nothing.
  void Prune(Node* node);

  Backend& backend_;
  Node root_;
  uint64_t clock_ = 0;
  std::map<uint64_t, Node*> lru_;  // entries by last use, oldest first
};

}  // namespace temper::engine
