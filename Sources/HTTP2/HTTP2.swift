public enum HTTP2Module {}
