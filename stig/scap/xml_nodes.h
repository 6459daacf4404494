// Walking a libxml2 tree: ownership of parsed documents and the few element lookups our readers
// (OVAL evidence, STIG Viewer checklists) need, so each reader states only what it looks for.
// Thread safety: pure functions; a document is used by one thread.
#pragma once

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <memory>
#include <string_view>
#include <vector>

namespace temper::stig::xml {

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
struct CtxtFree {
  void operator()(xmlParserCtxt* c) const { xmlFreeParserCtxt(c); }
};
using DocPtr = std::unique_ptr<xmlDoc, DocFree>;
using ParserPtr = std::unique_ptr<xmlParserCtxt, CtxtFree>;

// The element's local name.
inline std::string_view Name(const xmlNode* n) { return reinterpret_cast<const char*>(n->name); }

// The element children of `n` (none for null), in document order.
inline std::vector<const xmlNode*> Children(const xmlNode* n) {
  std::vector<const xmlNode*> out;
  for (const xmlNode* c = n ? n->children : nullptr; c; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) out.push_back(c);
  }
  return out;
}

// The first element child named `name`, or null.
inline const xmlNode* Child(const xmlNode* n, std::string_view name) {
  for (const xmlNode* c : Children(n)) {
    if (Name(c) == name) return c;
  }
  return nullptr;
}

}  // namespace temper::stig::xml
