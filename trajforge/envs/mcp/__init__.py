"""``mcp:PATH/tools.json`` environments: an MCP ``tools/list`` JSON plus a module of functions.

No class to write; see ``env`` for the conventions and the trust note (loading one runs the
module). They go through the same registry as every environment (``env_spec("mcp:...")``).
"""

from trajforge._compat import ENV_MODULE_NAMES, moved_names
from trajforge.envs.mcp.env import (HOOKS, PREFIX, Implementation, McpEnv, check_implementation, load_module,
                                    mcp_env_class, mcp_spec, read_tool_list)

__all__ = ["HOOKS", "PREFIX", "Implementation", "McpEnv", "check_implementation", "load_module", "mcp_env_class",
           "mcp_spec", "read_tool_list"]

__getattr__ = moved_names(__name__, {"answers_match": "trajforge.envs.answers", "ToolSpec": "trajforge.schema",
                                     "Toolset": "trajforge.schema", **ENV_MODULE_NAMES})
