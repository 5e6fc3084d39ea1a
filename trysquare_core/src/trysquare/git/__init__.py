"""The one core package that knows git: what a measured clone holds and how it changed.

Everything trysquare reads from a measured clone goes through here, and nothing
here writes into it — ``.git`` included.

**The clone's ``.git`` is hostile** (docs/security.md): the measured agent wrote it. Its
config can name programs (``filter.*.clean``/``smudge``/``process``,
``diff.*.textconv``/``command``, ``diff.external``, ``core.fsmonitor``,
``core.pager``, ``core.hooksPath``, ``include.path`` to a FIFO that hangs us), its
index can hide work (``assume-unchanged``, ``skip-worktree``, a forged index), and
its refs can lie (``refs/replace/``, ``info/grafts``, a moved tag). So no git
command ever runs with the clone's ``.git`` as its repository. Instead each call
runs against a *shadow* ``GIT_DIR`` that trysquare builds in its own cache
(``$XDG_CACHE_HOME/trysquare/shadow/``, never in the run folder, which the agent
could pre-plant):

- ``config`` written by us (no drivers, ``core.fsmonitor=false``, hooks at
  ``/dev/null``); ``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL=/dev/null`` and
  no inherited ``GIT_*`` variable, so no other config is read at all;
- ``objects/info/alternates`` naming the clone's object store (found by reading
  ``.git``, a ``gitdir:`` file and ``commondir`` in Python): objects are
  content-addressed, so borrowing them is safe;
- no replace refs, no grafts, no shallow file (``GIT_NO_REPLACE_OBJECTS=1`` too);
  for resolving a symbolic ``base`` once, the clone's refs are read in Python
  (``refs/replace/`` skipped) into a throwaway shadow's ``packed-refs``;
- an index made by ``read-tree <base>``: a stat cache of the base commit, which
  ``git status`` refreshes and keeps (the shadow is ours to write), so
  ``status``/``diff-files`` compare the *working tree with the base commit
  object* directly — the clone's index, its flags and its HEAD play no part.
  What comes from the base commit alone (this index, the rules below, the base's
  folders and paths) is built once per commit and copied into each clone's shadow:
  shared by every clone at that commit, so only after the commit, every tree and
  every rule file were hashed against their ids (a clone's rewritten store must
  not become another run's base). A context build, which only reads (``diff-files``,
  ``ls-files``, ``check-attr``), uses that base folder itself as its shadow, the
  clone's store named to each process in ``GIT_ALTERNATE_OBJECT_DIRECTORIES``;
- ``info/exclude``: the ``.gitignore`` files *as they are at base* (a nested one
  anchored to its folder) plus run.toml's ``excluded`` patterns, given to
  ``ls-files --others --exclude-from`` — never ``--exclude-standard``, which would
  read the work tree's ``.gitignore`` (the agent's edits), ``.git/info/exclude``
  and ``core.excludesFile``;
- ``info/attributes`` (the highest-precedence attributes file): first a line
  resetting ``text``/``eol``/``crlf``/``ident``/``filter``/``diff``/
  ``working-tree-encoding`` for every path, then the ``.gitattributes`` files *as
  they are at base*. So the work tree's ``.gitattributes`` never changes how a
  file is hashed or diffed: the agent's edit of ``.gitattributes`` is itself a
  touched file (seen in ``touched`` and the patch), not a lens over the others.
  Base attributes are kept because a project's own ``eol``/``text`` rules decide
  what its checked-out files look like. With no driver in our config, a
  ``filter=``/``diff=`` attribute names nothing that could run.

A submodule counts as touched when its checked-out commit moves (read from its
refs in Python); its uncommitted edits are not inspected, since that would run git
with the submodule's own config.

Paths are POSIX, relative to the repository root, decoded with
:func:`os.fsdecode` (undecodable bytes survive as surrogates). Stdlib only:
``trysquare.assay`` imports this package.

One module a job, each importing only those above it:

- :mod:`~trysquare.git.quoting`: git's C-style path quoting;
- :mod:`~trysquare.git.running`: running git (environment, config, timeout, failures);
- :mod:`~trysquare.git.hostile`: reading what the agent wrote without blocking or following;
- :mod:`~trysquare.git.dotgit`: the clone's ``.git`` read in Python;
- :mod:`~trysquare.git.shadow`: the shadow ``GIT_DIR`` and its cache;
- :mod:`~trysquare.git.refs`: what a name resolves to, what lies between two commits;
- :mod:`~trysquare.git.changes`: ``touched`` (:func:`~trysquare.git.changes.changed_files`,
  base against the working tree, never the history) and ``files``
  (:func:`~trysquare.git.changes.working_files`), both from one ``git status`` pass in
  :func:`~trysquare.git.changes.touched_and_files`;
- :mod:`~trysquare.git.patch`: ``diff.patch`` (``git diff <base>`` plus untracked files
  rendered exactly as ``git diff --no-index /dev/null <file>`` renders them), and
  :func:`~trysquare.git.patch.context_facts`, all three from two git processes at most
  (``diff-files``, and ``ls-files --others`` when a walk of the work tree meets a path
  the base does not track: a context build's whole git);
- :mod:`~trysquare.git.etalon`: a reference tree written into a shared cache, never a
  worktree of the clone;
- :mod:`~trysquare.git.suite_copy`: a throwaway copy of the working tree for a test suite.
"""
