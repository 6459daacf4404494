// Walking a libxml2 tree: ownership of parsed documents and the few element lookups our readers
// (OVAL evidence, STIG Viewer checklists, DISA STIGs) need, so each reader states only what it looks for.
// Thread safety: pure functions; a document is used by one thread.
#pragma once

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <memory>
#include <string>
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

// The element's namespace URI, empty when it has none.
inline std::string_view Namespace(const xmlNode* n) {
  return n->ns && n->ns->href ? std::string_view(reinterpret_cast<const char*>(n->ns->href)) : std::string_view();
}

// The attribute's value, empty when absent.
inline std::string Attribute(const xmlNode* n, const char* name) {
  xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
  if (!v) return "";
  std::string out(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return out;
}

// The text of `n` and its descendants, entities decoded; empty for null.
inline std::string Text(const xmlNode* n) {
  xmlChar* v = n ? xmlNodeGetContent(n) : nullptr;
  if (!v) return "";
  std::string out(reinterpret_cast<const char*>(v));
  xmlFree(v);
  return out;
}

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
