"""The names a server answers to: what a request's ``Host`` header may carry.

The guard refuses any other ``Host`` (DNS rebinding: a page of ``evil.example``
whose name now resolves to this machine sends ``Host: evil.example``). A server
bound to one address answers to that address and to the names given with
``--allow-host``. A server bound to all interfaces (``0.0.0.0``, ``::``) also answers
to the machine's host names and to every address of its interfaces as found at
start, and to the loopback forms: an address added later needs ``--allow-host``.
"""

from __future__ import annotations

import ipaddress
import socket

ALL_INTERFACES = frozenset({"0.0.0.0", "::", "[::]", ""})
LOOPBACK_FORMS = ("localhost", "127.0.0.1", "::1")


def is_all_interfaces(host: str) -> bool:
    """True for a wildcard bind (every interface of the machine)."""
    return host.strip() in ALL_INTERFACES


def machine_names() -> set[str]:
    """The machine's host name and fully qualified name (empty ones left out)."""
    # getfqdn looks the name up; without an entry for it, it answers the short name
    names = {socket.gethostname(), socket.getfqdn()}
    return {n.lower() for n in names if n}


def interface_addresses() -> set[str]:
    """Every IPv4 and IPv6 address of the machine's interfaces (without IPv6 zones)."""
    import psutil

    found = set()
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                found.add(a.address.split("%", 1)[0].lower())
    return found


def served_names(host: str, allowed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The host names and addresses a server bound to ``host`` answers to, sorted.

    ``allowed`` are more names (``--allow-host``), taken as given (lower case,
    brackets of IPv6 addresses dropped); the bound address itself is always in.
    """
    names = {host.strip().strip("[]").lower()}
    names |= {a.strip().strip("[]").lower() for a in allowed if a.strip()}
    if is_all_interfaces(host):
        names |= machine_names() | interface_addresses() | set(LOOPBACK_FORMS)
    names.discard("")
    return tuple(sorted(names))


def check_name(name: str) -> str:
    """``name`` if it can be a ``Host`` header's name; ValueError says what is wrong."""
    bare = name.strip().strip("[]")
    if not bare or any(c in bare for c in "/?#@ ") or (":" in bare and not _ipv6(bare)):
        raise ValueError(
            f"--allow-host {name!r} is not a host name or address: give a name (dash.example) "
            "or an address (192.0.2.7, [2001:db8::7]), without scheme, port or path."
        )
    return bare.lower()


def _ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True
