"""The ``relrep-hf`` commands, one module each (like transformers' ``commands/``): each
``register``s its parser, flags and ``run`` on the command line's subparsers. `relrep_hf.cli`
builds the parser from `COMMANDS`, in this order; `arguments` holds the pieces they share.

Light to import: a command imports the pipeline only when it runs.
"""

from relrep_hf.commands import (
    bridge,
    cleanup,
    demo,
    embed,
    evaluate,
    fit,
    fit_migration,
    migrate,
    onboard,
    push,
    reembed,
    rollback,
)

COMMANDS = (
    embed,
    fit,
    onboard,
    evaluate,
    fit_migration,
    migrate,
    reembed,
    rollback,
    cleanup,
    bridge,
    push,
    demo,
)

__all__ = ["COMMANDS"]
