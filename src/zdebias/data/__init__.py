"""The data layer: one record type, streaming readers, atomic writers, label sets."""

from zdebias.data.labels import TASKS, Task, get_task
from zdebias.data.mapping import ReadReport
from zdebias.data.readers import iter_records, open_dataset, read_records
from zdebias.data.schema import Record
from zdebias.data.writers import write_jsonl, write_parquet, write_records

__all__ = [
    "TASKS",
    "ReadReport",
    "Record",
    "Task",
    "get_task",
    "iter_records",
    "open_dataset",
    "read_records",
    "write_jsonl",
    "write_parquet",
    "write_records",
]
