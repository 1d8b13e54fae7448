/* ioctl request numbers, computed by the compiler from the UAPI macros.
 *
 * Every line of the form `static const unsigned long SITS_<NAME> = <NAME>;`
 * is also exported to Python (csrc/build_kernel.py reads this file), where
 * the names serve error messages and the eBPF ioctl decoder. Add a line here
 * and the ioctl exists everywhere.
 */

/* V4L2 */
static const unsigned long SITS_VIDIOC_QUERYCAP = VIDIOC_QUERYCAP;
static const unsigned long SITS_VIDIOC_ENUM_FMT = VIDIOC_ENUM_FMT;
static const unsigned long SITS_VIDIOC_G_FMT = VIDIOC_G_FMT;
static const unsigned long SITS_VIDIOC_S_FMT = VIDIOC_S_FMT;
static const unsigned long SITS_VIDIOC_TRY_FMT = VIDIOC_TRY_FMT;
static const unsigned long SITS_VIDIOC_REQBUFS = VIDIOC_REQBUFS;
static const unsigned long SITS_VIDIOC_CREATE_BUFS = VIDIOC_CREATE_BUFS;
static const unsigned long SITS_VIDIOC_QUERYBUF = VIDIOC_QUERYBUF;
static const unsigned long SITS_VIDIOC_QBUF = VIDIOC_QBUF;
static const unsigned long SITS_VIDIOC_DQBUF = VIDIOC_DQBUF;
static const unsigned long SITS_VIDIOC_EXPBUF = VIDIOC_EXPBUF;
static const unsigned long SITS_VIDIOC_STREAMON = VIDIOC_STREAMON;
static const unsigned long SITS_VIDIOC_STREAMOFF = VIDIOC_STREAMOFF;
static const unsigned long SITS_VIDIOC_G_PARM = VIDIOC_G_PARM;
static const unsigned long SITS_VIDIOC_S_PARM = VIDIOC_S_PARM;
static const unsigned long SITS_VIDIOC_ENUM_FRAMESIZES = VIDIOC_ENUM_FRAMESIZES;
static const unsigned long SITS_VIDIOC_ENUM_FRAMEINTERVALS = VIDIOC_ENUM_FRAMEINTERVALS;
static const unsigned long SITS_VIDIOC_ENUMINPUT = VIDIOC_ENUMINPUT;
static const unsigned long SITS_VIDIOC_G_INPUT = VIDIOC_G_INPUT;
static const unsigned long SITS_VIDIOC_S_INPUT = VIDIOC_S_INPUT;
static const unsigned long SITS_VIDIOC_QUERYCTRL = VIDIOC_QUERYCTRL;
static const unsigned long SITS_VIDIOC_QUERY_EXT_CTRL = VIDIOC_QUERY_EXT_CTRL;
static const unsigned long SITS_VIDIOC_QUERYMENU = VIDIOC_QUERYMENU;
static const unsigned long SITS_VIDIOC_G_CTRL = VIDIOC_G_CTRL;
static const unsigned long SITS_VIDIOC_S_CTRL = VIDIOC_S_CTRL;
static const unsigned long SITS_VIDIOC_G_EXT_CTRLS = VIDIOC_G_EXT_CTRLS;
static const unsigned long SITS_VIDIOC_S_EXT_CTRLS = VIDIOC_S_EXT_CTRLS;
static const unsigned long SITS_VIDIOC_SUBSCRIBE_EVENT = VIDIOC_SUBSCRIBE_EVENT;
static const unsigned long SITS_VIDIOC_DQEVENT = VIDIOC_DQEVENT;

/* DRM / KMS (libdrm wraps most of these; the numbers still serve the
 * ioctl decoder and the few calls libdrm has no wrapper for) */
static const unsigned long SITS_DRM_IOCTL_VERSION = DRM_IOCTL_VERSION;
static const unsigned long SITS_DRM_IOCTL_GET_CAP = DRM_IOCTL_GET_CAP;
static const unsigned long SITS_DRM_IOCTL_SET_CLIENT_CAP = DRM_IOCTL_SET_CLIENT_CAP;
static const unsigned long SITS_DRM_IOCTL_SET_MASTER = DRM_IOCTL_SET_MASTER;
static const unsigned long SITS_DRM_IOCTL_DROP_MASTER = DRM_IOCTL_DROP_MASTER;
static const unsigned long SITS_DRM_IOCTL_GEM_CLOSE = DRM_IOCTL_GEM_CLOSE;
static const unsigned long SITS_DRM_IOCTL_PRIME_HANDLE_TO_FD = DRM_IOCTL_PRIME_HANDLE_TO_FD;
static const unsigned long SITS_DRM_IOCTL_PRIME_FD_TO_HANDLE = DRM_IOCTL_PRIME_FD_TO_HANDLE;
static const unsigned long SITS_DRM_IOCTL_MODE_GETRESOURCES = DRM_IOCTL_MODE_GETRESOURCES;
static const unsigned long SITS_DRM_IOCTL_MODE_GETCRTC = DRM_IOCTL_MODE_GETCRTC;
static const unsigned long SITS_DRM_IOCTL_MODE_SETCRTC = DRM_IOCTL_MODE_SETCRTC;
static const unsigned long SITS_DRM_IOCTL_MODE_GETENCODER = DRM_IOCTL_MODE_GETENCODER;
static const unsigned long SITS_DRM_IOCTL_MODE_GETCONNECTOR = DRM_IOCTL_MODE_GETCONNECTOR;
static const unsigned long SITS_DRM_IOCTL_MODE_GETPROPERTY = DRM_IOCTL_MODE_GETPROPERTY;
static const unsigned long SITS_DRM_IOCTL_MODE_GETPROPBLOB = DRM_IOCTL_MODE_GETPROPBLOB;
static const unsigned long SITS_DRM_IOCTL_MODE_GETFB = DRM_IOCTL_MODE_GETFB;
static const unsigned long SITS_DRM_IOCTL_MODE_ADDFB = DRM_IOCTL_MODE_ADDFB;
static const unsigned long SITS_DRM_IOCTL_MODE_ADDFB2 = DRM_IOCTL_MODE_ADDFB2;
static const unsigned long SITS_DRM_IOCTL_MODE_RMFB = DRM_IOCTL_MODE_RMFB;
static const unsigned long SITS_DRM_IOCTL_MODE_PAGE_FLIP = DRM_IOCTL_MODE_PAGE_FLIP;
static const unsigned long SITS_DRM_IOCTL_MODE_CREATE_DUMB = DRM_IOCTL_MODE_CREATE_DUMB;
static const unsigned long SITS_DRM_IOCTL_MODE_MAP_DUMB = DRM_IOCTL_MODE_MAP_DUMB;
static const unsigned long SITS_DRM_IOCTL_MODE_DESTROY_DUMB = DRM_IOCTL_MODE_DESTROY_DUMB;
static const unsigned long SITS_DRM_IOCTL_MODE_GETPLANERESOURCES = DRM_IOCTL_MODE_GETPLANERESOURCES;
static const unsigned long SITS_DRM_IOCTL_MODE_GETPLANE = DRM_IOCTL_MODE_GETPLANE;
static const unsigned long SITS_DRM_IOCTL_MODE_SETPLANE = DRM_IOCTL_MODE_SETPLANE;
static const unsigned long SITS_DRM_IOCTL_MODE_OBJ_GETPROPERTIES = DRM_IOCTL_MODE_OBJ_GETPROPERTIES;
static const unsigned long SITS_DRM_IOCTL_MODE_OBJ_SETPROPERTY = DRM_IOCTL_MODE_OBJ_SETPROPERTY;
static const unsigned long SITS_DRM_IOCTL_MODE_ATOMIC = DRM_IOCTL_MODE_ATOMIC;
static const unsigned long SITS_DRM_IOCTL_MODE_CREATEPROPBLOB = DRM_IOCTL_MODE_CREATEPROPBLOB;
static const unsigned long SITS_DRM_IOCTL_MODE_DESTROYPROPBLOB = DRM_IOCTL_MODE_DESTROYPROPBLOB;
static const unsigned long SITS_DRM_IOCTL_WAIT_VBLANK = DRM_IOCTL_WAIT_VBLANK;

/* dma-buf, dma-heap, udmabuf, sync_file */
static const unsigned long SITS_DMA_BUF_IOCTL_SYNC = DMA_BUF_IOCTL_SYNC;
static const unsigned long SITS_DMA_BUF_SET_NAME = DMA_BUF_SET_NAME;
static const unsigned long SITS_DMA_BUF_IOCTL_EXPORT_SYNC_FILE = DMA_BUF_IOCTL_EXPORT_SYNC_FILE;
static const unsigned long SITS_DMA_BUF_IOCTL_IMPORT_SYNC_FILE = DMA_BUF_IOCTL_IMPORT_SYNC_FILE;
static const unsigned long SITS_DMA_HEAP_IOCTL_ALLOC = DMA_HEAP_IOCTL_ALLOC;
static const unsigned long SITS_UDMABUF_CREATE = UDMABUF_CREATE;
static const unsigned long SITS_UDMABUF_CREATE_LIST = UDMABUF_CREATE_LIST;
static const unsigned long SITS_SYNC_IOC_MERGE = SYNC_IOC_MERGE;
static const unsigned long SITS_SYNC_IOC_FILE_INFO = SYNC_IOC_FILE_INFO;
