"""The front door's tamper evidence (docs/integrity.md): the store's head signed after the
batches a writing command commits, and `verify`: the hash chain, the shipped hosts' chains
and the signed heads. Each delegates to advisor.store.integrity.headlog and
advisor.pipeline.verify."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.front.base import Front

if TYPE_CHECKING:
    from advisor.pipeline.verify import Collected, Verification
    from advisor.store.integrity.audit import HeadsReport


class Integrity(Front):
    def sign_heads(
        self, on_error: Callable[[str], None], key_path: Path | None = None
    ) -> Callable[[], None] | None:
        """Sign the store's head after the batches committed from now on, with the key at
        `key_path`, else the `key` setting, else the store's own key (created on first use;
        advisor.store.integrity.keyplace). What to call when the command ends (it signs the
        last head), or None for an in-memory store (nothing to sign)."""
        from advisor.store.integrity.headlog import HeadWriter, load_or_create_key, store_label
        from advisor.store.integrity.keyplace import place_for, settle

        label = store_label(self.store.url)
        if label is None:
            return None
        place = place_for(label, key_path or self.settings.key)
        key = load_or_create_key(place.key)
        settle(place)
        writer = HeadWriter(
            self.store,
            key,
            host=self.settings.host,
            label=label,
            heads_file=place.heads,
            on_error=on_error,
        )
        return writer.close

    def collect_heads(
        self,
        key_path: Path | None,
        heads_file: Path | None,
        journal_files: tuple[Path, ...],
    ) -> Collected | None:
        """The heads signed for the settings' store (the heads file, the journal), without
        opening it, checked against its key (`key_path`, else as `sign_heads` chooses it);
        None for an in-memory store, which has none. Creates nothing."""
        from advisor.pipeline.verify import collect
        from advisor.store.integrity.headlog import store_label
        from advisor.store.integrity.keyplace import place_for

        url = self.settings.db_url
        label = store_label(url)
        if label is None:
            return None
        place = place_for(label, key_path or self.settings.key)
        return collect(url, label, place.key, heads_file or place.heads, journal_files)

    @staticmethod
    def missing_store_heads(collected: Collected) -> HeadsReport:
        """The heads compared with a store that does not exist (the missing store is the
        finding)."""
        from advisor.pipeline.verify import missing_store_heads

        return missing_store_heads(collected)

    def last_seq(self) -> int:
        """The store's last sequence number (0 when empty)."""
        from advisor.store.integrity import retained

        return retained.last_seq(self.store)

    def verify(
        self, collected: Collected | None, progress: Callable[[int], None] | None = None
    ) -> Verification:
        """Walk the hash chain (`progress` told of the events checked), each shipped host's
        chain, and with `collected` the signed heads."""
        from advisor.pipeline.verify import verify_store

        return verify_store(self.store, collected, progress)
