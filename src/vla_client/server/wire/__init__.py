"""The server's half of the wire: reading requests and writing replies.

`decode` turns a request body, in any form SGLang's action API and openpi accept, into arrays
(`decode_request`, also offered by `vla_client.server`); `reply_build` writes the reply
documents that `vla_client.protocol.reply_read` reads on the robot. What both sides read (paths,
bodies, documents, statuses) stays in `vla_client.protocol`; a robot never loads this package.
"""
