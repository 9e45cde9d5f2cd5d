public enum PostgresModule {}
