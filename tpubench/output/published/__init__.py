"""Published results beside your own (DESIGN section 23): importers for InferenceX API rows and
MLPerf Inference results, their store beside your results, and the matched comparison.

    rows, notes = import_inferencex("dsr1.json", model="deepseek-ai/DeepSeek-R1-0528")
    write_published(rows, Path("results"), store_name("InferenceX", Path("dsr1.json")))
    compare_published(load_results("results/"), read_published("results/"))

Published rows never enter a cost table or a budget unless asked (`include_published`), and a row
that beats physics (estimate/physics.py) enters nothing: store.py says where each row is checked.
"""

from tpubench.output.published.inferencex import import_inferencex
from tpubench.output.published.match import DEFAULT_TOLERANCE, compare_published, interpolate_front, pareto_front
from tpubench.output.published.mlperf import import_mlperf
from tpubench.output.published.rows import COLUMNS, SOURCE_MEASURED, SOURCE_PUBLISHED, as_result_rows
from tpubench.output.published.store import published_files, read_published, shipped_published, store_name, write_published

__all__ = ["COLUMNS", "DEFAULT_TOLERANCE", "SOURCE_MEASURED", "SOURCE_PUBLISHED", "as_result_rows",
           "compare_published", "import_inferencex", "import_mlperf", "interpolate_front", "pareto_front",
           "published_files", "read_published", "shipped_published", "store_name", "write_published"]
