/* A minimal intrusive doubly-linked list, circular with a head node. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct list_node {
    struct list_node *prev, *next;
};

static inline void list_init(struct list_node *head)
{
    head->prev = head->next = head;
}

static inline bool list_empty(const struct list_node *head)
{
    return head->next == head;
}

/* Whether n is currently on some list (it is kept self-linked when not). */
static inline bool list_linked(const struct list_node *n)
{
    return n->next != n && n->next != NULL;
}

static inline void list_add_tail(struct list_node *head, struct list_node *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}

static inline void list_del(struct list_node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}

/* Moves every node of src to the empty list dst, in order; src is left empty. */
static inline void list_move_all(struct list_node *dst, struct list_node *src)
{
    if (src->next == src) {
        dst->next = dst->prev = dst;
        return;
    }
    dst->next = src->next;
    dst->prev = src->prev;
    dst->next->prev = dst;
    dst->prev->next = dst;
    src->next = src->prev = src;
}

#define list_entry(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Iterates safely against removal of the current node. */
#define list_for_each_safe(pos, tmp, head) \
    for (pos = (head)->next, tmp = pos->next; pos != (head); pos = tmp, tmp = pos->next)
