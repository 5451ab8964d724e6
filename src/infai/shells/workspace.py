from infai.agent.workspace import Workspace as Workspace  # moved: a shim
