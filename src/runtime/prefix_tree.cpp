// The prefix cache's radix tree (prefix_tree.hpp).
#include "runtime/prefix_tree.hpp"

#include <algorithm>
#include <string>

#include "synapse/error.hpp"

namespace synapse::runtime {

PrefixTree::PrefixTree(int64_t page_size) : page_(static_cast<size_t>(page_size)) {
  if (page_size < 1) throw Error(Errc::invalid_argument, "page_size must be at least 1, got " + std::to_string(page_size));
}

PrefixTree::Node* PrefixTree::child_of(Node* node, std::span<const token_id> tokens) const {
  if (tokens.size() < page_) return nullptr;
  for (const std::unique_ptr<Node>& c : node->children)
    if (std::equal(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(page_), c->key.begin())) return c.get();
  return nullptr;
}

size_t PrefixTree::common_pages(std::span<const token_id> tokens, const std::vector<token_id>& key) const {
  const size_t n = std::min(tokens.size(), key.size()) / page_ * page_;
  const auto [a, b] = std::mismatch(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n), key.begin());
  return static_cast<size_t>(a - tokens.begin()) / page_ * page_;
}

PrefixTree::Node* PrefixTree::split(Node* node, size_t at) {
  auto up = std::make_unique<Node>();
  up->end = node->end - static_cast<int64_t>(node->key.size() - at);
  up->seq.emplace(node->seq->fork(up->end));  // whole pages: referenced, nothing taken
  up->key.assign(node->key.begin(), node->key.begin() + static_cast<std::ptrdiff_t>(at));
  up->parent = node->parent;
  up->last_used = node->last_used;
  node->key.erase(node->key.begin(), node->key.begin() + static_cast<std::ptrdiff_t>(at));
  auto it = std::find_if(node->parent->children.begin(), node->parent->children.end(),
                         [&](const std::unique_ptr<Node>& c) { return c.get() == node; });
  std::unique_ptr<Node> lower = std::move(*it);
  lower->parent = up.get();
  up->children.push_back(std::move(lower));
  *it = std::move(up);
  ++n_nodes_;
  return it->get();
}

PrefixTree::Match PrefixTree::match(std::span<const token_id> tokens, uint64_t now) {
  Node* node = &root_;
  size_t pos = 0;
  while (Node* child = child_of(node, tokens.subspan(pos))) {
    const size_t k = common_pages(tokens.subspan(pos), child->key);
    if (k < child->key.size()) child = split(child, k);
    child->last_used = now;
    node = child;
    pos += k;
  }
  return node == &root_ ? Match{} : Match{node, node->end};
}

PrefixTree::Node* PrefixTree::insert(std::span<const token_id> tokens, const Sequence& seq, uint64_t now) {
  const size_t n = std::min(tokens.size(), static_cast<size_t>(seq.n_past())) / page_ * page_;
  const Match cached = match(tokens.first(n), now);
  Node* node = cached.node ? cached.node : &root_;
  const size_t pos = static_cast<size_t>(cached.n);
  if (pos == n) return cached.node;
  auto fresh = std::make_unique<Node>();
  fresh->seq.emplace(seq.fork(static_cast<int64_t>(n)));
  fresh->key.assign(tokens.begin() + static_cast<std::ptrdiff_t>(pos), tokens.begin() + static_cast<std::ptrdiff_t>(n));
  fresh->end = static_cast<int64_t>(n);
  fresh->parent = node;
  fresh->last_used = now;
  n_pages_ += static_cast<int64_t>((n - pos) / page_);
  ++n_nodes_;
  node->children.push_back(std::move(fresh));
  return node->children.back().get();
}

bool PrefixTree::evict_one() {
  Node* victim = nullptr;
  std::vector<Node*> todo{&root_};
  while (!todo.empty()) {
    Node* n = todo.back();
    todo.pop_back();
    for (const std::unique_ptr<Node>& c : n->children) todo.push_back(c.get());
    if (n != &root_ && n->children.empty() && n->locks == 0 && (!victim || n->last_used < victim->last_used))
      victim = n;
  }
  if (!victim) return false;
  n_pages_ -= static_cast<int64_t>(victim->key.size() / page_);
  --n_nodes_;
  std::vector<std::unique_ptr<Node>>& siblings = victim->parent->children;
  siblings.erase(std::find_if(siblings.begin(), siblings.end(),
                              [&](const std::unique_ptr<Node>& c) { return c.get() == victim; }));
  return true;
}

}  // namespace synapse::runtime
