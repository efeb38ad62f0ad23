"""The image codecs of both sides under their 0.1.0 module name.

The robot's encoders live in `vla_client.codecs.image_encode`, the server's decoders in
`vla_client.codecs.image_decode` and the thread pool both use in `vla_client.codecs.parallel`;
`vla_client.codecs` hands out each name from its own module. Importing this module loads both
sides (OpenCV, Pillow and the isal PNG reader), as it did before the split.
"""

from vla_client.codecs.image_decode import DEFAULT_MAX_PIXELS as DEFAULT_MAX_PIXELS
from vla_client.codecs.image_decode import decode_image_bytes as decode_image_bytes
from vla_client.codecs.image_encode import DEFAULT_JPEG_QUALITY as DEFAULT_JPEG_QUALITY
from vla_client.codecs.image_encode import encode_jpeg as encode_jpeg
from vla_client.codecs.image_encode import encode_png as encode_png
from vla_client.codecs.parallel import map_frames as map_frames
