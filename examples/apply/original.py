"""A tiny in-memory key-value cache with expiry."""

import time
from dataclasses import dataclass


@dataclass
class Entry:
    value: object
    expires_at: float


class Cache:
    def __init__(self, ttl: float = 60.0) -> None:
        self.ttl = ttl
        self._data: dict[str, Entry] = {}

    def get(self, key: str, default: object = None) -> object:
        entry = self._data.get(key)
        if entry is None:
            return default
        if entry.expires_at < time.monotonic():
            del self._data[key]
            return default
        return entry.value

    def set(self, key: str, value: object) -> None:
        self._data[key] = Entry(value, time.monotonic() + self.ttl)

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __len__(self) -> int:
        return len(self._data)


def make_cache(ttl: float = 60.0) -> Cache:
    return Cache(ttl)
