/**
 * The largest control message: a frame's header, the v8-serialized message with the value skeletons
 * and errors it carries (tensor bytes travel in frame bodies, outside it). Channels whose messages
 * are always small accept less; a sender checks the size before it writes anything.
 */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024
