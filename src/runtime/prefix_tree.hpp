// The serving scheduler's prefix cache: a radix tree over token ids whose
// nodes own runs of whole KV pages (SGLang's RadixAttention, Zheng et al.
// 2024, with pages of Context::kv_pool().page_size positions as the unit).
//
// A node's key is the token ids of its run (a multiple of the page size; the
// children of a node differ in their first page); the path from the root
// spells the prefix [0, end) and the node holds a Sequence forked at `end`
// (Sequence::fork of whole pages: every page referenced, none copied), so
// the pages of a prefix stay in the pool while some node or some sequence
// holds them, independent of the slots that computed them. A sequence forked
// from a node's Sequence reads the same rows a fresh prefill would write
// (contract 2: a row's bits do not depend on the batch), so a reply does not
// depend on what the tree held.
//
// Eviction is least recently used over leaves no running request holds
// (lock()): dropping a leaf gives its own pages back (its ancestors' pages
// stay referenced by the ancestors' Sequences).
//
// Not thread-safe: the scheduler's worker thread alone uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "synapse/synapse.hpp"

namespace synapse::runtime {

class PrefixTree {
 public:
  struct Node {
    std::vector<token_id> key;  // this node's tokens, whole pages
    int64_t end = 0;            // positions from the root through this node
    std::optional<Sequence> seq;  // holds positions [0, end); none for the root
    Node* parent = nullptr;
    std::vector<std::unique_ptr<Node>> children;
    uint64_t last_used = 0;
    int32_t locks = 0;  // running requests whose sequences hold these pages
  };

  // page_size: positions a KV page (KvPoolStats::page_size, >= 1).
  explicit PrefixTree(int64_t page_size);

  struct Match {
    Node* node = nullptr;  // where the cached prefix ends (null: nothing cached)
    int64_t n = 0;         // its length: node->end, a multiple of the page size
  };
  // The longest prefix of `tokens` cached in whole pages. A node matched in
  // part is split at the last matching page first, so the prefix always ends
  // at a node's end. Marks the path used at time `now` (a counter).
  Match match(std::span<const token_id> tokens, uint64_t now);

  // Records the whole pages of `tokens` (at most seq.n_past() of them),
  // whose rows `seq` holds position by position: the pages not yet in the
  // tree become a node holding a fork of `seq`. Returns the node where they
  // end (null when not one whole page). Throws what Sequence::fork throws
  // (a sliding window that has given the pages back; the prefixes the tree
  // holds are then unchanged, though a node may have been split).
  Node* insert(std::span<const token_id> tokens, const Sequence& seq, uint64_t now);

  // A running request holds node's pages (its sequence was forked from it,
  // or inserted it): the node is not evicted until unlock.
  static void lock(Node* node) { ++node->locks; }
  static void unlock(Node* node) { --node->locks; }

  // Drops the least recently used leaf that no request holds; false when
  // there is none.
  bool evict_one();

  int64_t n_pages() const { return n_pages_; }  // pages the nodes own, each once
  int64_t n_nodes() const { return n_nodes_; }

 private:
  // Splits node at `at` tokens of its key (a page multiple in (0, key size)):
  // a new node with the first `at` tokens takes its place, node under it.
  Node* split(Node* node, size_t at);
  // The child of `node` whose first page is tokens[0, page), or null.
  Node* child_of(Node* node, std::span<const token_id> tokens) const;
  // Whole pages that tokens[0..] and key[0..] have in common.
  size_t common_pages(std::span<const token_id> tokens, const std::vector<token_id>& key) const;

  size_t page_;
  Node root_;
  int64_t n_pages_ = 0, n_nodes_ = 0;
};

}  // namespace synapse::runtime
