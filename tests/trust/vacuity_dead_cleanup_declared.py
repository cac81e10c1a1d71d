"""The dead cleanup of ``vacuity_dead_cleanup``, declared: ``ownership test`` accepts it.

A spec may keep an action that never fires at this instance (a branch a fix
disables, a path only larger instances reach) when it says why.
"""

import vacuity_dead_cleanup as base

spec = base.spec.derive("vacuity_dead_cleanup_declared")
spec.may_be_dead("cleanup", reason="kept to show the declaration; nothing sets ABORTING")
