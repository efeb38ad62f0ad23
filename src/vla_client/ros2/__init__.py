"""A ROS 2 node without a ROS install: a Zenoh session that follows rmw_zenoh's conventions.

`graph.Node` joins an rmw_zenoh graph (the Tier-1 ROS 2 middleware from Kilted on, packaged for
Jazzy too) as a real node: `ros2 node list` and `ros2 topic list` show it, its publishers reach
ROS subscriptions and ROS publishers reach it. `names` holds what rmw_zenoh puts on the wire
(key expressions, type names and hashes, liveliness tokens), `qos` the QoS profiles and their
token string, `attachment` the bytes each sample carries beside its payload.

Needs the ``ros2`` extra (eclipse-zenoh and rosbags); ``import vla_client`` never imports this
package, and zenoh is imported nowhere else.
"""
