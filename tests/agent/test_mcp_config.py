"""``[mcp.servers.NAME]`` in the user's and the project's configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from infai.agent.config import ConfigError, load_config


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    (work / ".infai").mkdir(parents=True)
    return tmp_path / "user.toml", work


STDIO = """
[mcp.servers.gh]
command = "github-mcp-server"
args = ["stdio"]
env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }
network = true
trust_read_only = true
include_tools = ["list_*"]
startup_timeout = 5
"""


def test_servers_are_read_with_their_settings(files: tuple[Path, Path]) -> None:
    user, work = files
    user.write_text(STDIO + '[mcp.servers.web]\nurl = "https://x/mcp"\ncall_timeout = 9.5\n')
    config = load_config(work, user)
    gh, web = config.mcp_servers
    assert (gh.name, gh.command, gh.args, gh.network, gh.trust_read_only) == (
        "gh",
        "github-mcp-server",
        ("stdio",),
        True,
        True,
    )
    assert gh.env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"} and gh.startup_timeout == 5.0
    assert (web.transport, web.url, web.call_timeout, web.source) == (
        "http",
        "https://x/mcp",
        9.5,
        user,
    )


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('[mcp.servers.a]\ncommand = "x"\nurl = "http://h"\n', "mcp.servers.a: give either"),
        ("[mcp.servers.a]\nenabled = true\n", "mcp.servers.a: give either"),
        ('[mcp.servers.a]\ncommand = "x"\nargs = "y"\n', "mcp.servers.a.args: must be a list"),
        ('[mcp.servers.a]\ncommand = "x"\ncolour = 1\n', "unknown key 'colour'"),
        ('[mcp.servers.a]\ncommand = "x"\ncall_timeout = 0\n', "call_timeout: must be a pos"),
        ('[mcp.servers.a]\nurl = "ftp://h"\n', "mcp.servers.a.url: must start with http"),
        ('[mcp.servers.a]\nurl = "http://h"\nenv = {}\n', "env apply to a command"),
        ('[mcp.servers."a__b"]\ncommand = "x"\n', "mcp.servers.a__b: a server's name"),
        ("[mcp]\nserver = {}\n", "mcp: unknown key 'server'"),
    ],
)
def test_bad_tables_are_errors_naming_file_and_key(
    files: tuple[Path, Path], table: str, said: str
) -> None:
    user, work = files
    user.write_text(table)
    with pytest.raises(ConfigError) as caught:
        load_config(work, user)
    assert str(caught.value).startswith(f"{user}: ") and said in str(caught.value)


def test_an_untrusted_projects_servers_are_left_out_a_trusted_ones_start(
    files: tuple[Path, Path],
) -> None:
    user, work = files
    (work / ".infai" / "config.toml").write_text('[mcp.servers.evil]\ncommand = "curl"\n')
    user.write_text('[mcp.servers.mine]\ncommand = "mine"\n')
    config = load_config(work, user)
    assert [s.name for s in config.mcp_servers] == ["mine"]
    assert any("its MCP servers (evil) were left out" in w for w in config.warnings)
    user.write_text(f'trusted_projects = ["{work}"]\n[mcp.servers.mine]\ncommand = "mine"\n')
    trusted = load_config(work, user)
    assert [s.name for s in trusted.mcp_servers] == ["mine", "evil"]
