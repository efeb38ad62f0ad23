"""Split in 0.2.0 into `vla_client.protocol.reply_build` (the server's builders) and
`vla_client.protocol.reply_read` (the client's readers); `vla_client.protocol` hands out every
name. Importing them from here still works, with a warning."""

from vla_client.validation import moved_names

_BUILD = ("build_envelope", "build_raw", "new_request_id")
_READ = ("BYTES_PER_ACTION_VALUE", "REPLY_SIZE_FLOOR", "Reply", "read_actions", "read_reply",
         "reply_size_limit")  # fmt: skip

__getattr__, __dir__ = moved_names(
    __name__,
    {
        **dict.fromkeys(_BUILD, "vla_client.protocol.reply_build"),
        **dict.fromkeys(_READ, "vla_client.protocol.reply_read"),
    },
)
