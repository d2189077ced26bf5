"""``--reload``: a server serves the searcher saved into its ``--searcher`` folder since it started, without a restart.

The loop an engineer runs: ``shortlist serve openai --searcher rec/searcher --record logs --reload`` serves and
records; ``shortlist recommend --tools ... --log logs --out rec`` (nightly, say) trains on what was recorded and
saves a new searcher into ``rec/searcher``; the server picks it up within :data:`RELOAD_SECONDS`.

:class:`SearcherWatch` checks the folder every :data:`RELOAD_SECONDS`: the name, size, modification time and inode of
each of its files (:func:`folder_stamp`; a saved searcher replaces the whole folder at once,
:meth:`shortlist_depth.ToolSearch.save`, and ``shortlist recommend --publish DIR`` saves one there). A change is loaded
off the event loop (:meth:`shortlist_depth.ToolSearch.load`, which checks every file against the sha256
``searcher.json`` records) and handed to the server, which swaps it in between requests: a request already being
shortlisted finishes with the searcher it started with. A searcher that cannot be loaded (a folder being copied file
by file, a tampered file, another package version's) is logged as a warning and the current one kept; it is tried
again when any file of the folder changes again. The first stamp is the one taken before the server loaded the
searcher it serves (``since``), so a searcher saved while the server was starting is served too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from servers import chosen_kind, policy_id
from shortlist_depth.toolsearch import ToolSearch

LOG = logging.getLogger("servers.reload")

#: How often the folder is checked, seconds.
RELOAD_SECONDS = 2.0
#: The file whose change means a new searcher was saved.
META = "searcher.json"


#: A folder's state: (relative path, inode, size, mtime in ns) of each of its files, sorted.
Stamp = tuple[tuple[str, int, int, int], ...]


def folder_stamp(folder: str | os.PathLike[str]) -> Stamp | None:
    """The state of a saved searcher's folder (:data:`Stamp`); None while it has no ``searcher.json`` (absent, or
    being replaced). Any file added, removed, rewritten or replaced changes it."""
    root = Path(folder)
    try:
        if not (root / META).is_file():
            return None
        out = []
        for path in sorted(root.rglob("*")):
            if path.is_file():
                st = path.stat()
                out.append((path.relative_to(root).as_posix(), st.st_ino, st.st_size, st.st_mtime_ns))
    except OSError:  # (a file gone while listed: the folder is being replaced)
        return None
    return tuple(out)


def describe(search: ToolSearch, registry: bool = True) -> str:
    """``bor-auto (threshold; bm25, 370 tools; policy_id 3f2a...)``: what a searcher serves, for the log (``auto``'s
    pick; without the registry's size where the requests bring their own tools)."""
    chosen = chosen_kind(search.policy)
    parts = [*([chosen] if chosen else []), search.scorer + (f", {len(search.tools)} tools" if registry else "")]
    return f"{search.policy.method} ({'; '.join(parts)}; policy_id {policy_id(search.policy)})"


class SearcherWatch:
    """Hands the server each searcher saved into ``folder`` after the one it serves (module docstring).

    Args:
        folder: the saved searcher's folder (``--searcher``).
        apply: awaited with each new searcher; it swaps it in, or raises ValueError to refuse it (logged, the
            current one kept).
        cache_dir: the package cache folder the searcher loads its scorer with.
        every: seconds between checks.
        since: the folder's stamp when the searcher served was loaded (default: now).
        registry: whether the server serves the searcher's registry (the log then says its size).
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        apply: Callable[[ToolSearch], Awaitable[None]],
        cache_dir: str | None = None,
        every: float = RELOAD_SECONDS,
        since: Stamp | None = None,
        registry: bool = True,
    ) -> None:
        self.folder = Path(folder)
        self.registry = registry
        self.apply = apply
        self.cache_dir = cache_dir
        self.every = every
        self.seen = folder_stamp(self.folder) if since is None else since
        self.loaded = 0
        """How many new searchers were swapped in."""

    async def check(self) -> bool:
        """Load and apply the searcher saved since the last check, if any; whether one was swapped in."""
        now = folder_stamp(self.folder)
        if now is None or now == self.seen:
            return False
        self.seen = now  # (one that fails is tried again only once the folder changes again)
        try:
            search = await anyio.to_thread.run_sync(lambda: ToolSearch.load(self.folder, cache_dir=self.cache_dir))
        except Exception as e:
            LOG.warning("--reload %s: the searcher saved there cannot be loaded (%s: %s); the current one is kept",
                        self.folder, type(e).__name__, e)  # fmt: skip
            return False
        try:
            await self.apply(search)
        except ValueError as e:
            LOG.warning(
                "--reload %s: the searcher saved there is refused (%s); the current one is kept", self.folder, e
            )
            return False
        self.loaded += 1
        LOG.info("--reload %s: now serving %s", self.folder, describe(search, self.registry))
        return True

    async def run(self) -> None:
        """Check every :attr:`every` seconds until cancelled; an unexpected error is logged, never raised (the
        server goes on serving the searcher it has)."""
        LOG.info("--reload %s: checked every %g s for a searcher saved there", self.folder, self.every)
        while True:
            await anyio.sleep(self.every)
            try:
                await self.check()
            except Exception as e:  # the server must not stop because its watcher failed
                LOG.warning("--reload %s: check failed (%s: %s)", self.folder, type(e).__name__, e)
