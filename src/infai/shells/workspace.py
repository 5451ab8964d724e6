from infai.agent.workspace import Workspace as Workspace  # noqa: F401  (moved)
