"""Small search tools: maximum bipartite matching and injective candidate assignments."""

from __future__ import annotations

from collections.abc import Iterator, Sequence


def max_matching(n_left: int, adj: Sequence[Sequence[int]]) -> list[int]:
    """Maximum matching; returns, per left vertex, its right vertex or -1."""
    match_left = [-1] * n_left
    match_right: dict[int, int] = {}
    for start in range(n_left):
        parent: dict[int, int] = {}
        queue = [start]
        head = 0
        free = -1
        while head < len(queue) and free < 0:
            u = queue[head]
            head += 1
            for v in adj[u]:
                if v in parent:
                    continue
                parent[v] = u
                owner = match_right.get(v, -1)
                if owner < 0:
                    free = v
                    break
                queue.append(owner)
        v = free
        while v >= 0:
            u = parent[v]
            previous = match_left[u]
            match_left[u] = v
            match_right[v] = u
            v = -1 if u == start else previous
    return match_left


def assignments(cands: list[list[int]], max_nodes: int) -> Iterator[tuple[int, ...]]:
    """Injective choices of one candidate per gold column, in preference order (iterative)."""
    n = len(cands)
    if n == 0:
        yield ()
        return
    seq = sorted(range(n), key=lambda i: (len(cands[i]), i))
    choice = [0] * n
    current = [-1] * n
    used: set[int] = set()
    level = 0
    nodes = 0
    while level >= 0:
        col = seq[level]
        options = cands[col]
        if current[col] >= 0:
            used.discard(current[col])
            current[col] = -1
        placed = False
        while choice[level] < len(options):
            j = options[choice[level]]
            choice[level] += 1
            nodes += 1
            if nodes > max_nodes:
                return
            if j not in used:
                used.add(j)
                current[col] = j
                placed = True
                break
        if not placed:
            choice[level] = 0
            level -= 1
        elif level == n - 1:
            yield tuple(current)
        else:
            level += 1
