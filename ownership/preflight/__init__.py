"""``ownership preflight``: a deploy gate that reads a deployment's real configuration and checks it.

Modules: :mod:`.readers` (SGLang and vLLM startup logs, SGLang's server-info
JSON), :mod:`.releases` (which spec models which release: the one table),
:mod:`.mapping` (real numbers to spec parameters, the page-size scaling and
why it preserves which prompts leak), :mod:`.verdict` (the analysis and the
SAFE / UNSAFE / NOT COVERED verdict with its remedy) and :mod:`.render`
(text and JSON).
"""

from ownership.preflight.readers import NodeConfig, read_node
from ownership.preflight.verdict import Preflight, Status, deployment, evaluate

__all__ = ["NodeConfig", "Preflight", "Status", "deployment", "evaluate", "read_node"]
