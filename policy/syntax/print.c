/* Canonical Cedar text of expressions and policies (`dome cedar format`). Parentheses are printed only
 * where precedence needs them; printing and parsing again gives the same tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/syntax/syntax.h"
#include "policy/syntax/value.h"

enum { PREC_IF, PREC_OR, PREC_AND, PREC_REL, PREC_ADD, PREC_MUL, PREC_UNARY, PREC_MEMBER };

static void print_escaped_byte(cedar_buf *buf, unsigned char c, bool pattern) {
  switch (c) {
    case '"':
      cedar_buf_puts(buf, "\\\"");
      return;
    case '\\':
      cedar_buf_puts(buf, "\\\\");
      return;
    case '\n':
      cedar_buf_puts(buf, "\\n");
      return;
    case '\r':
      cedar_buf_puts(buf, "\\r");
      return;
    case '\t':
      cedar_buf_puts(buf, "\\t");
      return;
    case '\0':
      cedar_buf_puts(buf, "\\0");
      return;
    case '*':
      if (pattern) {
        cedar_buf_puts(buf, "\\*");
        return;
      }
      break;
    default:
      if (c < 0x20 || c == 0x7f) {
        cedar_buf_printf(buf, "\\u{%x}", c);
        return;
      }
  }
  char ch = (char)c;
  cedar_buf_append(buf, &ch, 1);
}

void cedar_print_string(cedar_buf *buf, cedar_str s) {
  cedar_buf_puts(buf, "\"");
  for (size_t i = 0; i < s.len; i++) print_escaped_byte(buf, (unsigned char)s.ptr[i], false);
  cedar_buf_puts(buf, "\"");
}

void cedar_print_euid(cedar_buf *buf, const cedar_euid *uid) {
  cedar_buf_append(buf, uid->type.ptr, uid->type.len);
  cedar_buf_puts(buf, "::");
  cedar_print_string(buf, uid->id);
}

static int precedence(const cedar_expr *e) {
  switch ((cedar_expr_kind)e->kind) {
    case CX_IF:
      return PREC_IF;
    case CX_OR:
      return PREC_OR;
    case CX_AND:
      return PREC_AND;
    case CX_EQ:
    case CX_NE:
    case CX_LT:
    case CX_LE:
    case CX_GT:
    case CX_GE:
    case CX_IN:
    case CX_HAS_ATTR:
    case CX_LIKE:
    case CX_IS:
      return PREC_REL;
    case CX_ADD:
    case CX_SUB:
      return PREC_ADD;
    case CX_MUL:
      return PREC_MUL;
    case CX_NOT:
    case CX_NEG:
      return PREC_UNARY;
    case CX_LONG:
      return e->u.number < 0 ? PREC_UNARY : PREC_MEMBER;
    default:
      return PREC_MEMBER;
  }
}

static void print_at(cedar_buf *buf, const cedar_expr *e, int min_prec);

static void print_attr_name(cedar_buf *buf, cedar_str name, bool has) {
  if (cedar_is_identifier(name)) {
    if (!has) cedar_buf_puts(buf, ".");
    cedar_buf_append(buf, name.ptr, name.len);
  } else if (has) {
    cedar_print_string(buf, name);
  } else {
    cedar_buf_puts(buf, "[");
    cedar_print_string(buf, name);
    cedar_buf_puts(buf, "]");
  }
}

static void print_list(cedar_buf *buf, cedar_expr *const *items, size_t from, size_t count) {
  for (size_t i = from; i < count; i++) {
    if (i > from) cedar_buf_puts(buf, ", ");
    print_at(buf, items[i], PREC_IF);
  }
}

static const char *binary_op(cedar_expr_kind k) {
  switch (k) {
    case CX_OR:
      return " || ";
    case CX_AND:
      return " && ";
    case CX_EQ:
      return " == ";
    case CX_NE:
      return " != ";
    case CX_LT:
      return " < ";
    case CX_LE:
      return " <= ";
    case CX_GT:
      return " > ";
    case CX_GE:
      return " >= ";
    case CX_IN:
      return " in ";
    case CX_ADD:
      return " + ";
    case CX_SUB:
      return " - ";
    case CX_MUL:
      return " * ";
    default:
      return NULL;
  }
}

static const char *method_name(cedar_expr_kind k) {
  switch (k) {
    case CX_CONTAINS:
      return "contains";
    case CX_CONTAINS_ALL:
      return "containsAll";
    case CX_CONTAINS_ANY:
      return "containsAny";
    case CX_IS_EMPTY:
      return "isEmpty";
    case CX_GET_TAG:
      return "getTag";
    case CX_HAS_TAG:
      return "hasTag";
    default:
      return NULL;
  }
}

static void print_at(cedar_buf *buf, const cedar_expr *e, int min_prec) {
  int prec = precedence(e);
  bool paren = prec < min_prec;
  if (paren) cedar_buf_puts(buf, "(");
  const char *op;
  switch ((cedar_expr_kind)e->kind) {
    case CX_BOOL:
      cedar_buf_puts(buf, e->u.boolean ? "true" : "false");
      break;
    case CX_LONG:
      cedar_buf_printf(buf, "%lld", (long long)e->u.number);
      break;
    case CX_STRING:
      cedar_print_string(buf, e->u.s);
      break;
    case CX_ENTITY:
      cedar_print_euid(buf, &e->u.uid);
      break;
    case CX_VAR: {
      static const char *const names[] = {"principal", "action", "resource", "context"};
      cedar_buf_puts(buf, names[e->var & 3]);
      break;
    }
    case CX_SLOT:
      cedar_buf_puts(buf, e->var == 0 ? "?principal" : "?resource");
      break;
    case CX_UNKNOWN:
      cedar_buf_puts(buf, "unknown(");
      cedar_print_string(buf, e->u.s);
      cedar_buf_puts(buf, ")");
      break;
    case CX_VALUE:
      cedar_print_value(buf, e->u.value);
      break;
    case CX_NOT:
    case CX_NEG:
      cedar_buf_puts(buf, e->kind == CX_NOT ? "!" : "-");
      /* Unary chains and negative literals get parentheses: `!-x` and `-5` (a literal) differ. */
      if (e->u.op.a->kind == CX_LONG && e->kind == CX_NEG) {
        cedar_buf_puts(buf, "(");
        print_at(buf, e->u.op.a, PREC_IF);
        cedar_buf_puts(buf, ")");
      } else {
        print_at(buf, e->u.op.a, PREC_MEMBER);
      }
      break;
    case CX_IF:
      cedar_buf_puts(buf, "if ");
      print_at(buf, e->u.op.a, PREC_IF);
      cedar_buf_puts(buf, " then ");
      print_at(buf, e->u.op.b, PREC_IF);
      cedar_buf_puts(buf, " else ");
      print_at(buf, e->u.op.c, PREC_IF);
      break;
    case CX_HAS_ATTR:
      print_at(buf, e->u.op.a, PREC_ADD);
      cedar_buf_puts(buf, " has ");
      print_attr_name(buf, e->u.op.name, true);
      break;
    case CX_GET_ATTR:
      print_at(buf, e->u.op.a, PREC_MEMBER);
      print_attr_name(buf, e->u.op.name, false);
      break;
    case CX_LIKE:
      print_at(buf, e->u.op.a, PREC_ADD);
      cedar_buf_puts(buf, " like \"");
      for (size_t i = 0; i < e->u.op.pattern.length; i++) {
        int16_t c = e->u.op.pattern.elements[i];
        if (c == CEDAR_PATTERN_STAR)
          cedar_buf_puts(buf, "*");
        else
          print_escaped_byte(buf, (unsigned char)c, true);
      }
      cedar_buf_puts(buf, "\"");
      break;
    case CX_IS:
      print_at(buf, e->u.op.a, PREC_ADD);
      cedar_buf_puts(buf, " is ");
      cedar_buf_append(buf, e->u.op.name.ptr, e->u.op.name.len);
      if (e->u.op.b) {
        cedar_buf_puts(buf, " in ");
        print_at(buf, e->u.op.b, PREC_ADD);
      }
      break;
    case CX_SET:
      cedar_buf_puts(buf, "[");
      print_list(buf, e->u.list.items, 0, e->u.list.count);
      cedar_buf_puts(buf, "]");
      break;
    case CX_RECORD:
      cedar_buf_puts(buf, "{");
      for (size_t i = 0; i < e->u.list.count; i++) {
        if (i) cedar_buf_puts(buf, ", ");
        if (cedar_is_identifier(e->u.list.keys[i]))
          cedar_buf_append(buf, e->u.list.keys[i].ptr, e->u.list.keys[i].len);
        else
          cedar_print_string(buf, e->u.list.keys[i]);
        cedar_buf_puts(buf, ": ");
        print_at(buf, e->u.list.items[i], PREC_IF);
      }
      cedar_buf_puts(buf, "}");
      break;
    case CX_CALL:
      if (e->u.list.function && e->u.list.function->method_style && e->u.list.count > 0) {
        print_at(buf, e->u.list.items[0], PREC_MEMBER);
        cedar_buf_puts(buf, ".");
        cedar_buf_append(buf, e->u.list.name.ptr, e->u.list.name.len);
        cedar_buf_puts(buf, "(");
        print_list(buf, e->u.list.items, 1, e->u.list.count);
      } else {
        cedar_buf_append(buf, e->u.list.name.ptr, e->u.list.name.len);
        cedar_buf_puts(buf, "(");
        print_list(buf, e->u.list.items, 0, e->u.list.count);
      }
      cedar_buf_puts(buf, ")");
      break;
    default:
      if ((op = method_name((cedar_expr_kind)e->kind))) {
        print_at(buf, e->u.op.a, PREC_MEMBER);
        cedar_buf_printf(buf, ".%s(", op);
        if (e->u.op.b) print_at(buf, e->u.op.b, PREC_IF);
        cedar_buf_puts(buf, ")");
      } else if ((op = binary_op((cedar_expr_kind)e->kind))) {
        /* Left-associative levels keep the left operand at their level; relations are not associative. */
        int left = prec == PREC_REL ? PREC_ADD : prec;
        print_at(buf, e->u.op.a, left);
        cedar_buf_puts(buf, op);
        print_at(buf, e->u.op.b, prec + 1);
      }
      break;
  }
  if (paren) cedar_buf_puts(buf, ")");
}

void cedar_print_expr(cedar_buf *buf, const cedar_expr *expr) {
  print_at(buf, expr, PREC_IF);
}

static void print_scope(cedar_buf *buf, const char *var, const cedar_scope *s) {
  cedar_buf_printf(buf, "  %s", var);
  const char *slot = var[0] == 'p' ? "?principal" : "?resource";
  switch ((cedar_scope_op)s->op) {
    case CEDAR_SCOPE_ANY:
      break;
    case CEDAR_SCOPE_EQ:
    case CEDAR_SCOPE_IN:
      cedar_buf_puts(buf, s->op == CEDAR_SCOPE_EQ ? " == " : " in ");
      if (s->slot)
        cedar_buf_puts(buf, slot);
      else
        cedar_print_euid(buf, &s->uid);
      break;
    case CEDAR_SCOPE_IS:
    case CEDAR_SCOPE_IS_IN:
      cedar_buf_puts(buf, " is ");
      cedar_buf_append(buf, s->type.ptr, s->type.len);
      if (s->op == CEDAR_SCOPE_IS_IN) {
        cedar_buf_puts(buf, " in ");
        if (s->slot)
          cedar_buf_puts(buf, slot);
        else
          cedar_print_euid(buf, &s->uid);
      }
      break;
    case CEDAR_SCOPE_IN_LIST:
      cedar_buf_puts(buf, " in [");
      for (size_t i = 0; i < s->list_count; i++) {
        if (i) cedar_buf_puts(buf, ", ");
        cedar_print_euid(buf, &s->list[i]);
      }
      cedar_buf_puts(buf, "]");
      break;
  }
}

void cedar_print_policy(cedar_buf *buf, const cedar_policy *p) {
  for (size_t i = 0; i < p->annotation_count; i++) {
    cedar_buf_puts(buf, "@");
    cedar_buf_append(buf, p->annotations[i].key.ptr, p->annotations[i].key.len);
    if (p->annotations[i].has_value) {
      cedar_buf_puts(buf, "(");
      cedar_print_string(buf, p->annotations[i].value);
      cedar_buf_puts(buf, ")");
    }
    cedar_buf_puts(buf, "\n");
  }
  cedar_buf_puts(buf, p->effect == CEDAR_PERMIT ? "permit (\n" : "forbid (\n");
  print_scope(buf, "principal", &p->principal);
  cedar_buf_puts(buf, ",\n");
  print_scope(buf, "action", &p->action);
  cedar_buf_puts(buf, ",\n");
  print_scope(buf, "resource", &p->resource);
  cedar_buf_puts(buf, "\n)");
  for (size_t i = 0; i < p->condition_count; i++) {
    cedar_buf_puts(buf, p->conditions[i].is_when ? "\nwhen { " : "\nunless { ");
    cedar_print_expr(buf, p->conditions[i].body);
    cedar_buf_puts(buf, " }");
  }
  cedar_buf_puts(buf, ";\n");
}

char *cedar_policy_to_text(const cedar_policy *policy) {
  cedar_buf b = {0};
  cedar_print_policy(&b, policy);
  return cedar_buf_finish(&b);
}

char *cedar_policy_set_to_text(const cedar_policy_set *set) {
  cedar_buf b = {0};
  bool first = true;
  for (size_t i = 0; i < set->count; i++) {
    if (set->policies[i]->template_id) continue;
    if (!first) cedar_buf_puts(&b, "\n");
    first = false;
    cedar_print_policy(&b, set->policies[i]);
  }
  return cedar_buf_finish(&b);
}
