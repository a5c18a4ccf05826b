# The public names of relrep_hf.migration, each written once: type checkers and IDEs read them here,
# and __init__.py reads them (`relrep_hf.utils.lazy_imports.stub_names`) to import each on
# first use, so that a Ray worker importing one store module does not import torch. A name
# exported before answers from its module with a warning (utils/deprecated_import.py).

from relrep_hf.migration.migrate import migrate as migrate
from relrep_hf.migration.reembed import MissingTextError as MissingTextError
from relrep_hf.migration.report import migration_report as migration_report
from relrep_hf.migration.selection import select_migration_map as select_migration_map
from relrep_hf.migration.space import StoreSpace as StoreSpace, StoreSpaceError as StoreSpaceError
from relrep_hf.migration.stores import (
    VectorStore as VectorStore,
    VectorStoreError as VectorStoreError,
    open_store as open_store,
)
