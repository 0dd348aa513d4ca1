/* Intrusive doubly linked list (circular, with a sentinel head). */
#ifndef COLLX_UTIL_LIST_H
#define COLLX_UTIL_LIST_H

#include <stddef.h>

struct collx_list {
  struct collx_list *prev, *next;
};

#define COLLX_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

static inline void collx_list_init(struct collx_list *head) { head->prev = head->next = head; }
static inline int collx_list_empty(const struct collx_list *head) { return head->next == head; }

static inline void collx_list_add_tail(struct collx_list *head, struct collx_list *node) {
  node->prev = head->prev;
  node->next = head;
  head->prev->next = node;
  head->prev = node;
}

static inline void collx_list_del(struct collx_list *node) {
  node->prev->next = node->next;
  node->next->prev = node->prev;
  node->prev = node->next = node;
}

#define collx_list_for_each_safe(pos, tmp, head) \
  for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

#endif
